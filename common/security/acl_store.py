"""ACLs in ZooKeeper where Kafka keeps them (kafka.zk.KafkaZkClient's ACL methods and
AclAuthorizer.updateResourceAcls), over the asyncio ZooKeeper helper (common/zk_async.py).

A resource's znode holds all its entries; a change rewrites it conditionally on the version it
read (create if missing, delete when no entry is left), retrying on a lost race as Kafka does,
and only then leaves a sequential notification under the change path, so every authorizer that
reads the notification finds the new entries. Notifications older than 15 minutes are purged
by whoever processes them (ZkNodeChangeNotificationListener's changeExpirationMs).

The format and path rules are common/security/acl.py's; this module only reads and writes.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from common.security.acl import (
    ACL_PATHS,
    CHANGE_PREFIX,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclError,
    ResourcePattern,
    change_path,
    decode_acls,
    encode_acls,
    encode_change,
    resource_path,
    type_paths,
)

MAX_UPDATE_RETRIES = 10  # AclAuthorizer's maxUpdateRetries
CHANGE_EXPIRATION_MS = 15 * 60 * 1000  # ZkNodeChangeNotificationListener's changeExpirationMs

Entries = frozenset[AccessControlEntry]


class AclStore:
    """Reads and writes ``/kafka-acl*`` through an AsyncZk. ``on_corrupt(path, error)`` hears of
    a znode that does not decode (it is skipped: a hostile znode never stops an authorizer)."""

    def __init__(self, zk, on_corrupt: Callable[[str, str], None] | None = None):
        self.zk = zk
        self.on_corrupt = on_corrupt or (lambda path, error: None)

    async def ensure_paths(self) -> None:
        for path in ACL_PATHS:
            await self.zk.ensure_path(path)

    async def read(self, pattern: ResourcePattern) -> tuple[Entries, int | None]:
        """The entries of ``pattern`` and the znode's version (None: no znode)."""
        path = resource_path(pattern)
        got = await self.zk.get_or_none(path)
        if got is None:
            return frozenset(), None
        data, stat = got
        try:
            return decode_acls(data), stat.version
        except AclError as e:
            self.on_corrupt(path, str(e))
            return frozenset(), stat.version

    async def load_all(self) -> dict[ResourcePattern, Entries]:
        """Every stored pattern's entries (AclAuthorizer.loadAllAcls)."""
        out: dict[ResourcePattern, Entries] = {}
        for type_path, pattern_type, resource_type in type_paths():
            try:
                names = await self.zk.get_children(type_path)
            except NoNodeError:
                continue
            for name in names:
                try:
                    pattern = ResourcePattern(resource_type, name, pattern_type)
                except AclError as e:
                    self.on_corrupt(f"{type_path}/{name}", str(e))
                    continue
                entries, _ = await self.read(pattern)
                if entries:
                    out[pattern] = entries
        return out

    async def update(self, pattern: ResourcePattern,
                     change: Callable[[Entries], Entries]) -> tuple[Entries, Entries]:
        """Apply ``change`` to the stored entries of ``pattern`` (conditional on the version
        read, retried on a lost race) and announce it; (before, after)."""
        path = resource_path(pattern)
        for _ in range(MAX_UPDATE_RETRIES + 1):
            before, version = await self.read(pattern)
            after = frozenset(change(before))
            if after == before:
                return before, after
            try:
                if not after:
                    await self.zk.delete(path, version=version)
                elif version is None:
                    await self.zk.create(path, encode_acls(after), makepath=True)
                else:
                    await self.zk.set(path, encode_acls(after), version=version)
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue  # another writer got there first: read again
            await self.zk.create(change_path(pattern), encode_change(pattern), sequence=True,
                                 makepath=True)
            return before, after
        raise AclError(f"failed to update ACLs for {pattern} after {MAX_UPDATE_RETRIES} "
                       "retries (concurrent writers)")

    async def purge_changes(self, changes_path: str, children: list[str],
                            now_ms: int | None = None) -> None:
        """Delete the notifications older than CHANGE_EXPIRATION_MS (every reader has had
        them by then)."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        for child in children:
            if not child.startswith(CHANGE_PREFIX):
                continue
            path = f"{changes_path}/{child}"
            stat = await self.zk.exists(path)
            if stat is not None and now_ms - stat.ctime > CHANGE_EXPIRATION_MS:
                try:
                    await self.zk.delete(path)
                except NoNodeError:
                    pass  # another authorizer purged it


async def create_acls(store: AclStore, bindings: list[AclBinding]) -> None:
    """Add ``bindings`` (valid ones: acl.validate_binding), one write per resource."""
    by_pattern: dict[ResourcePattern, set[AccessControlEntry]] = {}
    for b in bindings:
        by_pattern.setdefault(b.pattern, set()).add(b.entry)
    for pattern, entries in by_pattern.items():
        await store.update(pattern, lambda cur, entries=entries: cur | entries)


async def delete_acls(store: AclStore, filters: list[AclBindingFilter]
                      ) -> list[list[AclBinding]]:
    """Remove what each filter matches (AclAuthorizer.deleteAcls); per filter, what it
    removed. Read from ZooKeeper, not a cache, so nothing written elsewhere is missed."""
    stored = await store.load_all()
    out: list[list[AclBinding]] = []
    for f in filters:
        removed: list[AclBinding] = []
        for pattern, entries in stored.items():
            if not f.pattern.matches(pattern):
                continue
            gone = frozenset(e for e in entries if f.matches_entry(e))
            if not gone:
                continue
            before, _ = await store.update(pattern, lambda cur, gone=gone: cur - gone)
            removed.extend(AclBinding(pattern, e) for e in sorted(
                gone & before, key=AccessControlEntry.sort_key))
            stored[pattern] = entries - gone
        out.append(removed)
    return out
