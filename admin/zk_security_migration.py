"""``replog zookeeper-security-migration`` — Kafka's ZkSecurityMigrator
(zookeeper-security-migration.sh): sets the ACLs of every znode under replog's root paths.

    replog zookeeper-security-migration --zookeeper.acl secure \\
        --zookeeper.connect HOST:PORT[/chroot] --zk-config-file server.properties

``secure`` gives each znode Kafka's defaultAcls (common/security/zk_acl.py: creator-all for the
tool's credentials, world-read except the sensitive paths); ``unsecure`` opens them again
(``world:anyone`` all). The walk covers ``SECURE_ROOT_PATHS`` (Kafka's ZkData.SecureRootPaths and
replog's /restart_partitions) and the chroot itself, as Kafka's tool does
(``setAclIndividually("/")``). Without a chroot the ensemble's own ``/`` is left as it is - it
is not replog's alone - and the tool says that top-level znodes such as /controller can then
still be deleted by anyone (ZooKeeper checks a delete against the parent's ACL).

Credentials: Kafka's tool takes them from the JAAS file named by
``-Djava.security.auth.login.config``; replog's from ``--zk-config-file`` (replog's option), a
properties file with ``zookeeper.auth.digest`` or ``zookeeper.auth.digest.file`` - the brokers'
own server.properties will do, other keys are ignored. They must be the cluster's: creator-all
is the tool's own identity, and only the creator may change a secured znode's ACL again.

Znodes are walked one level at a time with every request of a level in flight together (kazoo's
async calls), so a tree of 100k partition znodes is a few round trips per level; a znode deleted
meanwhile (an ephemeral, a processed restart entry) is skipped, as Kafka's migrator skips NoNode.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoAuthError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from common.errors import ConfigError, ReplogError
from common.properties import parse_properties_text
from common.security.zk_acl import SECURE_ROOT_PATHS, chroot_acls, default_acls
from common.security.zk_auth import DIGEST, DIGEST_FILE, ZkSecurity, zk_security

SECURE = "secure"
UNSECURE = "unsecure"


@dataclass
class MigrationResult:
    updated: int = 0  # znodes whose ACL was set
    vanished: int = 0  # deleted while the tool walked (NoNode)


def security_from_file(path: str | None) -> ZkSecurity:
    """The credentials in a properties file (only replog's zookeeper.auth.* keys are read)."""
    if path is None:
        return ZkSecurity()
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ReplogError(f"--zk-config-file: cannot read {path}: {e.strerror}") from None
    props = {k: v for k, v, _ in parse_properties_text(text, path) if k in (DIGEST, DIGEST_FILE)}
    try:
        return zk_security(props)
    except ConfigError as e:
        raise ReplogError(f"--zk-config-file {path}: {e}") from None


def _wait(results: list, timeout_s: float) -> list:
    """Each async result's value, or the exception it ended with."""
    out = []
    for r in results:
        try:
            out.append(r.get(timeout=timeout_s))
        except (NoNodeError, NoAuthError) as e:
            out.append(e)
    return out


def set_acls_recursively(client: KazooClient, roots: list[str], secure: bool,
                         timeout_s: float = 30.0) -> MigrationResult:
    """Set ``default_acls(path, secure)`` on every znode of the trees at ``roots`` (missing
    roots are skipped). Raises ReplogError on the first znode the credentials may not change."""
    result = MigrationResult()
    level = list(roots)
    while level:
        acl_results = _wait([client.set_acls_async(p, default_acls(p, secure)) for p in level],
                            timeout_s)
        children = _wait([client.get_children_async(p) for p in level], timeout_s)
        following = []
        for path, set_result, kids in zip(level, acl_results, children):
            if isinstance(set_result, NoAuthError):
                raise ReplogError(
                    f"not allowed to set the ACL of {path} (NoAuth): the credentials of "
                    "--zk-config-file must be the ones the cluster created its znodes with")
            if isinstance(set_result, NoNodeError) or isinstance(kids, NoNodeError):
                result.vanished += path not in roots
                continue
            result.updated += 1
            following += [path.rstrip("/") + "/" + k for k in sorted(kids)]
        level = following
    return result


def migrate(connect: str, mode: str, security: ZkSecurity,
            session_timeout_ms: int = 30000, connection_timeout_ms: int = 30000,
            enable_path_check: bool = False, out=None) -> MigrationResult:
    if mode not in (SECURE, UNSECURE):
        raise ReplogError("--zookeeper.acl: value must be either secure or unsecure")
    secure = mode == SECURE
    if secure and not security.auth_data:
        raise ReplogError("--zookeeper.acl secure needs the cluster's ZooKeeper credentials: "
                          f"--zk-config-file with {DIGEST} or {DIGEST_FILE}")
    client = KazooClient(connect, timeout=session_timeout_ms / 1000, **security.kazoo_args())
    try:
        client.start(connection_timeout_ms / 1000)
    except KazooTimeoutError:
        client.close()
        raise ReplogError(f"could not connect to ZooKeeper at {connect} within "
                          f"{connection_timeout_ms} ms") from None
    try:
        roots = [p for p in SECURE_ROOT_PATHS if client.exists(p) is not None]
        if enable_path_check and not roots:
            raise ReplogError(f"none of replog's znodes exist under {connect}: nothing to "
                              "migrate (check --zookeeper.connect's chroot)")
        if client.chroot:
            try:
                client.set_acls("/", chroot_acls(secure))
            except NoAuthError:
                raise ReplogError(f"not allowed to set the ACL of the chroot {client.chroot} "
                                  "(NoAuth): wrong credentials") from None
        else:
            print("Warning: no chroot in --zookeeper.connect: ZooKeeper's / is left as it is, "
                  "so anyone may still delete top-level znodes such as /controller; run "
                  "replog under a chroot (host:port/replog)", file=sys.stderr)
        result = set_acls_recursively(client, roots, secure, connection_timeout_ms / 1000)
    except (KazooException, KazooTimeoutError) as e:
        raise ReplogError(f"ZooKeeper at {connect}: {type(e).__name__} {e}".rstrip()) from None
    finally:
        client.stop()
        client.close()
    print(f"Set {mode} ACLs on {result.updated} znodes under {connect}"
          + (f" ({result.vanished} deleted meanwhile)" if result.vanished else ""),
          file=out or sys.stdout)
    return result


def add_parsers(sub) -> None:
    p = sub.add_parser("zookeeper-security-migration",
                       help="set (secure) or remove (unsecure) ACLs on replog's znodes "
                            "(zookeeper-security-migration)")
    p.add_argument("--zookeeper.acl", dest="zookeeper_acl", required=True,
                   metavar="secure|unsecure",
                   help="make replog's znodes secure (Kafka's default ACLs) or open again")
    p.add_argument("--zookeeper.connect", dest="zookeeper_connect", required=True,
                   metavar="HOST:PORT[/chroot]", help="the cluster's zookeeper.connect")
    p.add_argument("--zookeeper.session.timeout", dest="session_timeout", type=int,
                   default=30000, metavar="MS", help="session timeout (ms)")
    p.add_argument("--zookeeper.connection.timeout", dest="connection_timeout", type=int,
                   default=30000, metavar="MS", help="connection timeout (ms)")
    p.add_argument("--enable.path.check", dest="enable_path_check", action="store_true",
                   help="fail when none of replog's root znodes exists under the connect string")
    p.add_argument("--zk-config-file", metavar="FILE",
                   help="replog: properties file with zookeeper.auth.digest or "
                        "zookeeper.auth.digest.file (the brokers' server.properties will do)")

    def run(args) -> int:
        migrate(args.zookeeper_connect, args.zookeeper_acl,
                security_from_file(args.zk_config_file), args.session_timeout,
                args.connection_timeout, args.enable_path_check)
        return 0
    p.set_defaults(func=run)
