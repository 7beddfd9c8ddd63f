"""``replog acls`` — kafka-acls.sh (Kafka 3.x AclCommand): through any broker's authorizer with
``--bootstrap-server`` (the Admin API's CreateAcls, DescribeAcls, DeleteAcls; Alter or Describe
on the cluster needed), or straight into Kafka's AclAuthorizer store in ZooKeeper as its
``--authorizer-properties zookeeper.connect=...`` mode does:

    replog acls --authorizer-properties zookeeper.connect=127.0.0.1:2181/replog \\
        --add --allow-principal User:alice --producer --topic orders
    Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`:
     	(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)
    ...

Options, checks, the --producer/--consumer expansion and the output are AclCommand's:
``--producer`` is Write, Describe and Create on each --topic (and IdempotentWrite on the
cluster with --idempotent, Write and Describe on each --transactional-id); ``--consumer`` is
Read and Describe on each --topic and Read on each --group (which it requires, as Kafka does);
hosts default to ``*`` for the principals given; ``--operation`` defaults to All. ``--add``
stores each resource's entries in ``/kafka-acl/<Type>/<name>`` (or
``/kafka-acl-extended/prefixed/...``) and announces them under ``/kafka-acl-changes`` (or
``-extended-changes``), where every broker's and the controller's authorizer picks them up.
``--remove`` asks for confirmation on a terminal, as Kafka does; with no terminal to ask it
needs ``--force``. ``--list`` prints the ACLs of the resources named (all without one), and with
``--principal`` those of one principal.

With ``--authorizer-properties`` the properties are the broker's (``zookeeper.connect``, and
``zookeeper.set.acl`` with replog's ``zookeeper.auth.digest.file`` on a cluster with ZooKeeper
ACLs). With ``--bootstrap-server``, ``--command-config`` gives the client's TLS settings.
Either way one store is written and announced under ``/kafka-acl-changes``.
"""  # noqa: E101, E501

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterable

from admin import options
from client import KafkaError
from common.errors import ReplogError
from common.rpc import replog_pb2 as pb
from common.security.acl import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclError,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from common.security.acl_store import create_acls, delete_acls
from common.security.acl_wire import binding_from_pb, binding_pb, filter_pb
from common.security.authorizer import ACL_AUTHORIZER_CLASSES
from common.security.principal import KafkaPrincipal

WILDCARD_HOST = "*"
O = AclOperation  # noqa: E741
Filters = dict[ResourcePatternFilter, set[AccessControlEntry]]


# ---------------------------------------------------------------------------- checks (pure)

def _opt(name: str) -> str:
    return f'"[{name}]"'


def check_args(args) -> None:
    """AclCommandOptions.checkArgs, each refusal one ReplogError line with Kafka's words."""
    if args.bootstrap_server and args.authorizer:
        raise ReplogError("Only one of --bootstrap-server or --authorizer must be specified")
    if not args.bootstrap_server and not args.authorizer_properties:
        raise ReplogError(f"Missing required argument {_opt('authorizer-properties')}")
    if getattr(args, "command_config", None) and not args.bootstrap_server:
        raise ReplogError("The --command-config option can only be used with "
                          "--bootstrap-server option")
    if args.authorizer_properties and args.bootstrap_server:
        raise ReplogError("The --authorizer-properties option can only be used with "
                          "--authorizer option")
    if args.authorizer and args.authorizer not in ACL_AUTHORIZER_CLASSES:
        raise ReplogError(f"--authorizer {args.authorizer} is not supported (one of "
                          f"{', '.join(sorted(ACL_AUTHORIZER_CLASSES))})")
    if [args.add, args.remove, args.list].count(True) != 1:
        raise ReplogError("Command must include exactly one action: --list, --add, --remove. ")
    _invalid_with(args, "list", ("producer", "consumer", "allow_host", "allow_principal",
                                 "deny_host", "deny_principal"))
    _invalid_with(args, "producer", ("operation", "deny_principal", "deny_host"))
    _invalid_with(args, "consumer", ("operation", "deny_principal", "deny_host"))
    if args.principal and not args.list:
        raise ReplogError("The --principal option is only available if --list is set")
    if args.producer and not args.topic:
        raise ReplogError("With --producer you must specify a --topic")
    if args.idempotent and not args.producer:
        raise ReplogError("The --idempotent option is only available if --producer is set")
    if args.consumer and (not args.topic or not args.group or (
            not args.producer and (args.cluster or args.transactional_id))):
        raise ReplogError("With --consumer you must specify a --topic and a --group and no "
                          "--cluster or --transactional-id option should be specified.")


def _invalid_with(args, used: str, invalid: Iterable[str]) -> None:
    if not getattr(args, used):
        return
    for name in invalid:
        if getattr(args, name):
            raise ReplogError(f"Option {_opt(used.replace('_', '-'))} can't be used with "
                              f"option {_opt(name.replace('_', '-'))}")


def pattern_type(args) -> PatternType:
    try:
        return PatternType.parse(args.resource_pattern_type)
    except AclError:
        raise ReplogError(f"Unknown resource-pattern-type: {args.resource_pattern_type}") \
            from None


def resource_filters(args, die_if_none: bool = True) -> list[ResourcePatternFilter]:
    """AclCommand.getResourceFilter."""
    pt = pattern_type(args)
    out: list[ResourcePatternFilter] = []
    for t in args.topic or ():
        out.append(ResourcePatternFilter(ResourceType.TOPIC, t.strip(), pt))
    if pt == PatternType.LITERAL and (args.cluster or args.idempotent):
        out.append(ResourcePatternFilter(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL))
    for g in args.group or ():
        out.append(ResourcePatternFilter(ResourceType.GROUP, g.strip(), pt))
    for x in args.transactional_id or ():
        out.append(ResourcePatternFilter(ResourceType.TRANSACTIONAL_ID, x, pt))
    if not out and die_if_none:
        raise ReplogError("You must provide at least one resource: --topic <topic> or --cluster "
                          "or --group <group>")
    for f in out:
        if not f.name:
            raise ReplogError(f"{f.resource_type.value} name must not be empty")
    return list(dict.fromkeys(out))


def _principals(values: list[str] | None) -> set[KafkaPrincipal]:
    try:
        return {KafkaPrincipal.parse(v) for v in values or ()}
    except ValueError as e:
        raise ReplogError(str(e)) from None


def _hosts(hosts: list[str] | None, principals: list[str] | None) -> set[str]:
    if hosts:
        return {h.strip() for h in hosts}
    return {WILDCARD_HOST} if principals else set()


def entries(args, operations: Iterable[AclOperation]) -> set[AccessControlEntry]:
    """AclCommand.getAcl: every (principal, operation, host) of the allow and deny options."""
    out: set[AccessControlEntry] = set()
    for principals, hosts, permission in (
            (args.allow_principal, args.allow_host, AclPermissionType.ALLOW),
            (args.deny_principal, args.deny_host, AclPermissionType.DENY)):
        who, where = _principals(principals), _hosts(hosts, principals)
        out |= {AccessControlEntry(str(p), h, op, permission)
                for p in who for op in operations for h in where}
    return out


def cli_operations(args) -> set[AclOperation]:
    try:
        return {AclOperation.parse(o) for o in args.operation or ["All"]}
    except AclError as e:
        raise ReplogError(str(e)) from None


def filter_to_acls(args) -> Filters:
    """AclCommand.getResourceFilterToAcls: the CLI's operations, or what --producer and
    --consumer expand to."""
    out: Filters = {}
    filters = resource_filters(args)
    if not args.producer and not args.consumer:
        acls = entries(args, cli_operations(args))
        out.update({f: set(acls) for f in filters})
    if args.producer:
        for f in filters:
            if f.resource_type == ResourceType.TOPIC:
                out[f] = entries(args, {O.WRITE, O.DESCRIBE, O.CREATE})
            elif f.resource_type == ResourceType.TRANSACTIONAL_ID:
                out[f] = entries(args, {O.WRITE, O.DESCRIBE})
        if args.idempotent:
            cluster = ResourcePatternFilter(ResourceType.CLUSTER, CLUSTER_NAME)
            out[cluster] = entries(args, {O.IDEMPOTENT_WRITE})
    if args.consumer:
        for f in filters:
            if f.resource_type == ResourceType.TOPIC:
                out[f] = out.get(f, set()) | entries(args, {O.READ, O.DESCRIBE})
            elif f.resource_type == ResourceType.GROUP:
                out[f] = out.get(f, set()) | entries(args, {O.READ})
    for f, acls in out.items():  # AclCommand.validateOperation
        valid = SUPPORTED_OPERATIONS[f.resource_type] | {O.ALL}
        if {a.operation for a in acls} - valid:
            raise ReplogError(f"ResourceType {f.resource_type.name} only supports operations "
                              f"{','.join(sorted(o.name for o in valid))}")
    return out


def patterns_to_add(args) -> dict[ResourcePattern, set[AccessControlEntry]]:
    """AclCommand.getResourceToAcls."""
    pt = pattern_type(args)
    if not pt.is_specific:
        raise ReplogError(f"A '--resource-pattern-type' value of '{pt.name}' is not valid "
                          "when adding acls.")
    out = {f.pattern(): acls for f, acls in filter_to_acls(args).items()}
    if any(not acls for acls in out.values()):
        raise ReplogError("You must specify one of: --allow-principal, --deny-principal when "
                          "trying to add ACLs.")
    return out


# ---------------------------------------------------------------------------- output (pure)

def _block(acls: Iterable[AccessControlEntry]) -> str:
    """Kafka's ``$Newline ${acls.map("\\t" + _).mkString(Newline)} $Newline``."""
    return "\n " + "\n".join("\t" + str(a) for a in sorted(
        acls, key=AccessControlEntry.sort_key)) + " \n"


def adding(pattern: ResourcePattern, acls: Iterable[AccessControlEntry]) -> str:
    return f"Adding ACLs for resource `{pattern}`: {_block(acls)}"


def current(pattern: ResourcePattern, acls: Iterable[AccessControlEntry]) -> str:
    return f"Current ACLs for resource `{pattern}`: {_block(acls)}"


def listing(stored: dict[ResourcePattern, frozenset[AccessControlEntry]],
            filters: list[ResourcePatternFilter],
            principals: list[KafkaPrincipal]) -> list[str]:
    """AclCommand.listAcls over the stored ACLs: the resources the filters match (every one
    without a filter), per principal when --principal is given."""
    chosen = {p: acls for p, acls in stored.items()
              if not filters or any(f.matches(p) for f in filters)}
    if not principals:
        return [current(p, acls) for p, acls in sorted(chosen.items())]
    out = []
    for who in principals:
        out.append(f"ACLs for principal `{who}`")
        for p, acls in sorted(chosen.items()):
            mine = [a for a in acls if a.principal == str(who)]
            if mine:
                out.append(current(p, mine))
    return out


# ---------------------------------------------------------------------------- the command

def authorizer_properties(args) -> dict[str, str]:
    props: dict[str, str] = {}
    for item in args.authorizer_properties:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ReplogError(f"Invalid command line properties: {item!r} (expected key=value)")
        props[key.strip()] = value.strip()
    if not props.get("zookeeper.connect"):
        raise ReplogError('Missing required configuration "zookeeper.connect" which has no '
                          "default value.")
    return props


def _confirm(args, message: str) -> bool:
    """AclCommand.confirmAction; without a terminal there is nobody to ask."""
    if args.force:
        return True
    if not sys.stdin.isatty():
        raise ReplogError("--remove asks for confirmation and stdin is not a terminal: "
                          "add --force")
    print(message, flush=True)
    return sys.stdin.readline().strip().lower() == "y"


class _ZooKeeperStore:
    """--authorizer-properties: Kafka's znodes, written as the authorizer writes them."""

    def __init__(self, store):
        self.store = store

    async def add(self, pattern: ResourcePattern, acls: set[AccessControlEntry]) -> None:
        await create_acls(self.store, [AclBinding(pattern, a) for a in acls])

    async def remove(self, filters: list[AclBindingFilter]) -> None:
        await delete_acls(self.store, filters)

    async def stored(self) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        return await self.store.load_all()


class _Brokers:
    """--bootstrap-server: the Admin API, answered by any broker's authorizer."""

    def __init__(self, admin):
        self.admin = admin

    async def add(self, pattern: ResourcePattern, acls: set[AccessControlEntry]) -> None:
        resp = await self.admin.acl_call("CreateAcls", pb.CreateAclsRequest(creations=[
            binding_pb(AclBinding(pattern, a)) for a in acls]))
        _raise_first("adding", resp.results)

    async def remove(self, filters: list[AclBindingFilter]) -> None:
        resp = await self.admin.acl_call("DeleteAcls", pb.DeleteAclsRequest(
            filters=[filter_pb(f) for f in filters]))
        _raise_first("removing", resp.filter_results)

    async def stored(self) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        every = AclBindingFilter(ResourcePatternFilter(None, None, PatternType.ANY))
        resp = await self.admin.acl_call("DescribeAcls",
                                         pb.DescribeAclsRequest(filter=filter_pb(every)))
        out: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for m in resp.acls:
            b = binding_from_pb(m)
            out.setdefault(b.pattern, set()).add(b.entry)
        return {p: frozenset(e) for p, e in out.items()}


def _raise_first(what: str, results) -> None:
    for r in results:
        if r.error_code:
            raise KafkaError(r.error_code, f"Error while {what} ACLs: {r.error_message}")


def _removal_filters(f: ResourcePatternFilter, acls: set[AccessControlEntry]
                     ) -> list[AclBindingFilter]:
    """AclCommand.removeAcls: no entries named is every entry of the matching resources."""
    if not acls:
        return [AclBindingFilter(f)]
    return [AclBindingFilter(f, a.principal, a.host, a.operation, a.permission_type)
            for a in sorted(acls, key=AccessControlEntry.sort_key)]


async def _run(args) -> int:
    check_args(args)
    props = authorizer_properties(args) if not args.bootstrap_server else {}
    # everything the command line says is checked before a server is reached
    to_add = patterns_to_add(args) if args.add else None
    to_remove = filter_to_acls(args) if args.remove else None
    list_filters = resource_filters(args, die_if_none=False)
    list_principals = sorted(_principals(args.principal), key=str)
    async with _acl_service(args, props) as service:
        if to_add is not None:
            for pattern, acls in to_add.items():
                print(adding(pattern, acls))
                await service.add(pattern, acls)
        if to_remove is not None:
            for f, acls in to_remove.items():
                question = (f"Are you sure you want to delete all ACLs for resource filter "
                            f"`{f}`? (y/n)" if not acls else
                            f"Are you sure you want to remove ACLs: {_block(acls)} from "
                            f"resource filter `{f}`? (y/n)")
                if _confirm(args, question):
                    await service.remove(_removal_filters(f, acls))
        for line in listing(await service.stored(), list_filters, list_principals):
            print(line)
    return 0


@contextlib.asynccontextmanager
async def _acl_service(args, props: dict[str, str]):
    if args.bootstrap_server:
        from client import AdminClient
        async with AdminClient(args.bootstrap_server) as admin:
            yield _Brokers(admin)
        return
    from common.security.acl_store import AclStore
    from common.security.zk_auth import zk_security
    from common.zk_async import AsyncZk

    zk = AsyncZk(props["zookeeper.connect"], session_timeout_ms=30000,
                 connection_timeout_ms=15000, security=zk_security(props))
    try:
        await zk.start()
    except Exception as e:  # noqa: BLE001 - kazoo's timeout etc.: one line
        raise ReplogError(f"cannot connect to ZooKeeper at {props['zookeeper.connect']}: "
                          f"{type(e).__name__}: {e}") from None
    try:
        store = AclStore(zk, on_corrupt=lambda path, error: print(
            f"Warning: skipped {path}: {error}", file=sys.stderr))
        await store.ensure_paths()
        yield _ZooKeeperStore(store)
    finally:
        await zk.stop()


def add_parsers(sub) -> None:
    p = sub.add_parser("acls", help="add, remove or list ACLs (kafka-acls)", parents=[
        options.client(required=False, bootstrap_help="any broker of the cluster (its "
                       "authorizer answers; with --command-config for TLS)")])
    actions = p.add_argument_group("actions (exactly one)")
    actions.add_argument("--add", action="store_true", help="add ACLs")
    actions.add_argument("--remove", action="store_true", help="remove ACLs")
    actions.add_argument("--list", action="store_true",
                         help="list ACLs of the resources named (all without one)")
    p.add_argument("--authorizer-properties", action="extend", nargs="+", metavar="KEY=VALUE",
                   help="the authorizer's ZooKeeper: zookeeper.connect=HOST:PORT[/chroot] "
                        "(with zookeeper.set.acl=true and zookeeper.auth.digest.file=FILE on "
                        "a cluster with ZooKeeper ACLs)")
    p.add_argument("--authorizer", metavar="CLASS",
                   help="kafka.security.authorizer.AclAuthorizer (the default)")
    p.add_argument("--topic", action="append",
                   help="topic the ACLs apply to (repeatable; '*' is every topic)")
    p.add_argument("--cluster", action="store_true", help="the cluster's ACLs")
    p.add_argument("--group", action="append",
                   help="consumer group the ACLs apply to (repeatable; '*' is every group)")
    p.add_argument("--transactional-id", action="append", help="transactional id (repeatable)")
    p.add_argument("--resource-pattern-type", default="literal",
                   metavar="literal|prefixed|any|match",
                   help="adding: literal or prefixed; listing/removing also any (either type, "
                        "exact name) or match (every pattern that applies to the name)")
    p.add_argument("--allow-principal", action="append", metavar="TYPE:NAME",
                   help="principal allowed (repeatable), e.g. User:alice or User:*")
    p.add_argument("--deny-principal", action="append", metavar="TYPE:NAME",
                   help="principal denied (repeatable)")
    p.add_argument("--allow-host", action="append",
                   help="host the allowed principals may come from (default *)")
    p.add_argument("--deny-host", action="append",
                   help="host the denied principals are denied from (default *)")
    p.add_argument("--operation", action="append",
                   help="operation allowed or denied (repeatable; default All): "
                        + ", ".join(o.value for o in AclOperation))
    p.add_argument("--producer", action="store_true",
                   help="WRITE, DESCRIBE and CREATE on the topics")
    p.add_argument("--consumer", action="store_true",
                   help="READ and DESCRIBE on the topics, READ on the group")
    p.add_argument("--idempotent", action="store_true",
                   help="with --producer: IDEMPOTENT_WRITE on the cluster")
    p.add_argument("--principal", action="append", metavar="TYPE:NAME",
                   help="with --list: only this principal's ACLs")
    p.add_argument("--force", action="store_true",
                   help="assume yes to every question (--remove)")
    p.set_defaults(func=options.run_async(_run))
