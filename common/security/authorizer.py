"""The authorizer a broker and the controller run: Kafka's AclAuthorizer on ZooKeeper.

Configured as Kafka configures it: ``authorizer.class.name`` names
``kafka.security.authorizer.AclAuthorizer`` (or its pre-2.4 name
``kafka.security.auth.SimpleAclAuthorizer``); empty means no authorization (every request is
allowed, replog's behaviour before ACLs). ``super.users`` (``User:a;User:b``) are allowed
everything; ``allow.everyone.if.no.acl.found`` (default false) decides for resources without a
single ACL.

At start it loads every ACL from ``/kafka-acl`` and ``/kafka-acl-extended`` and watches
``/kafka-acl-changes`` and ``/kafka-acl-extended-changes``: each new notification names one
resource, whose znode is read again into the cache (AclAuthorizer's AclChangedNotificationHandler
through ZkNodeChangeNotificationListener). Decisions read the cache only (common/security/acl.py
``authorize``), never ZooKeeper, so a request never waits on ZooKeeper.

Servicers take an ``authorizer`` (None: allow everything) and ask ``authorize(who, operation,
resource)`` with the ``Requester`` a principal builder made for the request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import NoNodeError

from common.errors import ConfigError
from common.names import ascii_digits
from common.security.acl import (
    CHANGE_PREFIX,
    EXTENDED_CHANGES_PATH,
    LITERAL_CHANGES_PATH,
    SUPPORTED_OPERATIONS,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclError,
    AclOperation,
    ResourcePattern,
    authorize,
    decode_change,
    operations_bit_field,
    parse_super_users,
    validate_binding,
)
from common.security.acl_store import AclStore, create_acls, delete_acls
from common.security.principal import KafkaPrincipal, PrincipalBuilder

ACL_AUTHORIZER_CLASSES = frozenset({"kafka.security.authorizer.AclAuthorizer",
                                    "kafka.security.auth.SimpleAclAuthorizer"})
CHANGE_PATHS = (LITERAL_CHANGES_PATH, EXTENDED_CHANGES_PATH)


@dataclass(frozen=True)
class Requester:
    """Who sent a request and from where: Kafka's RequestContext principal and clientAddress."""

    principal: KafkaPrincipal
    host: str


def peer_host(peer: str | None) -> str:
    """The client address of a gRPC peer string (``ipv4:10.0.0.1:5000``,
    ``ipv6:[::1]:5000``, ``unix:/path``), as Kafka's clientAddress.getHostAddress."""
    if not peer:
        return ""
    kind, _, rest = peer.partition(":")
    if kind == "ipv6" and rest.startswith("["):
        return rest[1:rest.find("]")] if "]" in rest else rest
    if kind == "ipv4":
        return rest.rpartition(":")[0] or rest
    return rest


def grpc_requester(builder: PrincipalBuilder, context) -> Requester:
    peer = context.peer() if hasattr(context, "peer") else None
    return Requester(builder.from_grpc(context), peer_host(peer))


def enabled(class_name: str | None) -> bool:
    """Whether ``authorizer.class.name`` turns authorization on; an unknown class is refused
    (one line), as Kafka fails to start on a class it cannot load."""
    name = (class_name or "").strip()
    if not name:
        return False
    if name not in ACL_AUTHORIZER_CLASSES:
        raise ConfigError(f"authorizer.class.name: {name} is not supported (one of "
                          f"{', '.join(sorted(ACL_AUTHORIZER_CLASSES))}, or empty)")
    return True


class AclAuthorizer:
    """The ACL cache, filled from ZooKeeper and kept current by change notifications."""

    def __init__(self, zk, super_users: frozenset[KafkaPrincipal] = frozenset(),
                 allow_everyone_if_no_acl_found: bool = False, events=None):
        self.zk = zk
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self.events = events
        self.store = AclStore(zk, on_corrupt=self._corrupt)
        self.acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        self._last_change: dict[str, int] = {path: -1 for path in CHANGE_PATHS}
        self._lock = asyncio.Lock()
        self._tasks: set[asyncio.Task] = set()
        self._stopped = False
        # After a failed pass over a change path, the pass is tried again this much later, so
        # a change whose read failed is applied without waiting for another notification.
        self.change_retry_backoff_s = 1.0

    @classmethod
    def from_config(cls, config: Mapping[str, Any], zk, events=None) -> AclAuthorizer | None:
        """The configured authorizer, or None when ``authorizer.class.name`` is empty."""
        if not enabled(config.get("authorizer.class.name")):
            return None
        try:
            supers = parse_super_users(config.get("super.users"))
        except AclError as e:
            raise ConfigError(str(e)) from None
        return cls(zk, supers, bool(config.get("allow.everyone.if.no.acl.found")), events)

    # ------------------------------------------------------------------ decisions

    def allows_everything(self, who: Requester) -> bool:
        """A super user: no resource needs asking about (a long topic list is not walked)."""
        return who.principal in self.super_users

    def authorize(self, who: Requester, operation: AclOperation,
                  resource: ResourcePattern) -> bool:
        ok = authorize(who.principal, who.host, operation, resource, self.acls,
                       self.super_users, self.allow_everyone_if_no_acl_found)
        if not ok and self.events is not None:
            # Kafka's kafka.authorizer.logger audit line for a denial
            self.events.info("authorization_denied", principal=str(who.principal),
                             host=who.host, operation=operation.name,
                             resource=str(resource))
        return ok

    def authorized_operations(self, who: Requester, resource: ResourcePattern) -> int:
        """KIP-430's bit field of the operations ``who`` may do on ``resource``, among those
        an ACL on its type can allow (AuthHelper.authorizedOperations; no audit line for the
        ones refused, as Kafka asks with logIfDenied=false)."""
        return operations_bit_field(
            op for op in SUPPORTED_OPERATIONS[resource.resource_type]
            if authorize(who.principal, who.host, op, resource, self.acls, self.super_users,
                         self.allow_everyone_if_no_acl_found))

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        await self.store.ensure_paths()
        async with self._lock:
            self.acls = await self.store.load_all()
        # Notifications already there name resources loaded just now; reading them again is
        # harmless, and the watches they arm catch every later one.
        for path in CHANGE_PATHS:
            await self.process_changes(path)
        # A new session has none of the old one's watches: read (and arm) again once it is
        # connected. kazoo also fires each watch once as the session goes.
        self.zk.on_state_change(self._on_zk_state)

    def _on_zk_state(self, state: str) -> None:
        if state == "CONNECTED":
            for path in CHANGE_PATHS:
                self._schedule(path)

    async def stop(self) -> None:
        self._stopped = True
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    # ------------------------------------------------------------------ change notifications

    def _on_watch(self, path: str):
        return self.zk.watcher(lambda _event: self._schedule(path))

    def _schedule(self, path: str) -> None:  # on the loop
        if self._stopped:
            return
        task = asyncio.get_running_loop().create_task(self._process_safely(path))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _process_safely(self, path: str) -> None:
        try:
            # A watch fired by a lost session meets the loss: asked again until a session
            # answers, which also arms the watch again (KafkaZkClient's retry until connected).
            await self.zk.until_connected(lambda: self.process_changes(path))
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - a lost session etc.: tried again below
            if self.events is not None:
                self.events.warning("acl_change_processing_failed", path=path,
                                    error=f"{type(e).__name__}: {e}"[:300])
            # The failed change is still unprocessed (process_changes moves its mark only past
            # what it applied), so this pass reads it again; a new session's pass or the next
            # notification would too, but a revocation must not wait for either.
            await asyncio.sleep(self.change_retry_backoff_s)
            self._schedule(path)

    async def process_changes(self, changes_path: str) -> None:
        """Read the notifications under ``changes_path`` not yet processed (re-arming the
        watch) and reload each resource they name.

        The mark of what is processed moves past a notification only once its resource has
        been read into the cache (Kafka's ZkNodeChangeNotificationListener advances
        lastExecutedChange after processing): when a read raises - kazoo raises
        SessionExpiredError for a request queued while disconnected whose session then
        expires - the pass stops there and the next one reads that notification again. Moved
        before the read, a revoked ACL stayed granted on this broker until it restarted."""
        async with self._lock:
            try:
                children = await self.zk.get_children(changes_path,
                                                      watch=self._on_watch(changes_path))
            except NoNodeError:
                return
            seqs = sorted((int(c[len(CHANGE_PREFIX):]), c) for c in children
                          if c.startswith(CHANGE_PREFIX) and ascii_digits(c[len(CHANGE_PREFIX):]))
            for seq, child in seqs:
                if seq <= self._last_change[changes_path]:
                    continue
                got = await self.zk.get_or_none(f"{changes_path}/{child}")
                if got is None:
                    self._last_change[changes_path] = seq
                    continue  # purged meanwhile
                try:
                    pattern = decode_change(changes_path, got[0])
                except AclError as e:
                    self._last_change[changes_path] = seq  # it will not mend: skipped
                    self._corrupt(f"{changes_path}/{child}", str(e))
                    continue
                entries = await self._read_into_cache(pattern)
                self._last_change[changes_path] = seq  # only now: the read succeeded
                if self.events is not None:
                    self.events.info("acls_changed", resource=str(pattern),
                                     acls=sorted(str(e) for e in entries))
            await self.store.purge_changes(changes_path, [c for _, c in seqs])

    # ------------------------------------------------------------------ the ACL Admin API

    async def create_acls(self, items: list[AclBinding | AclError]) -> list[AclError | None]:
        """Kafka's Authorizer.createAcls: store every valid binding (an AclError in ``items``
        is a creation the wire could not read); per item its refusal or None. Raises when
        ZooKeeper fails."""
        out: list[AclError | None] = []
        valid = []
        for b in items:
            if not isinstance(b, AclError):
                try:
                    validate_binding(b)
                except AclError as e:
                    b = e
            out.append(b if isinstance(b, AclError) else None)
            if not isinstance(b, AclError):
                valid.append(b)
        await create_acls(self.store, valid)
        await self.reload(b.pattern for b in valid)
        return out

    def describe_acls(self, f: AclBindingFilter) -> list[AclBinding]:
        """Kafka's Authorizer.acls(filter), from the cache, by pattern then entry."""
        return [b for pattern, entries in sorted(self.acls.items())
                for b in (AclBinding(pattern, e) for e in sorted(
                    entries, key=AccessControlEntry.sort_key)) if f.matches(b)]

    async def delete_acls(self, items: list[AclBindingFilter | AclError]
                          ) -> list[AclError | list[AclBinding]]:
        """Kafka's Authorizer.deleteAcls: per filter what it removed, or its refusal."""
        removed = iter(await delete_acls(self.store, [
            f for f in items if not isinstance(f, AclError)]))
        out = [f if isinstance(f, AclError) else next(removed) for f in items]
        await self.reload(b.pattern for gone in out if not isinstance(gone, AclError)
                          for b in gone)
        return out

    async def reload(self, patterns) -> None:
        """Read ``patterns`` again into the cache at once: this process's own writes are
        visible to its next decision without waiting for their notifications (Kafka's
        updateResourceAcls updates its cache too)."""
        async with self._lock:
            for pattern in set(patterns):
                await self._read_into_cache(pattern)

    async def _read_into_cache(self, pattern: ResourcePattern) -> frozenset[AccessControlEntry]:
        """The stored entries of ``pattern``, now also the cache's (caller holds the lock)."""
        entries, _ = await self.store.read(pattern)
        if entries:
            self.acls[pattern] = entries
        else:
            self.acls.pop(pattern, None)
        return entries

    def _corrupt(self, path: str, error: str) -> None:
        if self.events is not None:
            self.events.warning("acl_znode_skipped", path=path, error=error[:300])


class _AllowAll:
    """No ``authorizer.class.name``: every request is allowed."""

    def allows_everything(self, who: Requester | None) -> bool:
        return True

    def authorize(self, who: Requester, operation: AclOperation,
                  resource: ResourcePattern) -> bool:
        return True

    def authorized_operations(self, who: Requester | None, resource: ResourcePattern) -> int:
        """Every supported operation: Kafka's answer when no authorizer is configured."""
        return operations_bit_field(SUPPORTED_OPERATIONS[resource.resource_type])


ALLOW_ALL = _AllowAll()
