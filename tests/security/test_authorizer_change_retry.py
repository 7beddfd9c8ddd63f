"""An ACL change whose read fails is not skipped (issue 42 defect 4): the authorizer moves its
mark of processed notifications only after the resource's ACLs were read into the cache, as
Kafka's ZkNodeChangeNotificationListener does, and tries a failed pass again. Real ZooKeeper;
the failure is kazoo's SessionExpiredError (a request queued while disconnected whose session
then expired) raised by the ACL read at the wrong moment: just after the notification naming
a revocation was read."""

from __future__ import annotations

import pytest
from kazoo.exceptions import SessionExpiredError

from common.security.acl import (
    LITERAL_CHANGES_PATH,
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    topic,
)
from common.security.acl_store import AclStore
from common.security.authorizer import AclAuthorizer, Requester
from common.security.principal import KafkaPrincipal
from common.zk_async import AsyncZk
from tests.polling import async_wait_until

ALICE = Requester(KafkaPrincipal("User", "alice"), "10.0.0.7")
READ = AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)


@pytest.fixture
async def zks(zk_hosts):
    clients = [AsyncZk(zk_hosts, session_timeout_ms=6000) for _ in range(2)]
    for c in clients:
        await c.start()
    yield clients
    for c in clients:
        await c.stop()


def fail_next_read(authorizer: AclAuthorizer) -> list[int]:
    """The authorizer's next ACL read raises SessionExpiredError; the list counts failures."""
    real = authorizer.store.read
    failed: list[int] = []

    async def read(pattern):
        if not failed:
            failed.append(1)
            raise SessionExpiredError()
        return await real(pattern)
    authorizer.store.read = read
    return failed


async def _granted_then_revoked_with_a_failed_read(zks, retry_backoff_s: float):
    authorizer = AclAuthorizer(zks[0])
    authorizer.change_retry_backoff_s = retry_backoff_s
    await AclStore(zks[1]).update(topic("t"), lambda acls: acls | {READ})
    await authorizer.start()
    assert authorizer.authorize(ALICE, AclOperation.READ, topic("t"))
    failed = fail_next_read(authorizer)
    await AclStore(zks[1]).update(topic("t"), lambda acls: frozenset())  # the revocation
    await async_wait_until(lambda: failed, timeout=10,
                           what="the notification's read to fail")
    return authorizer


async def test_a_revocation_whose_read_failed_is_applied_by_the_next_pass(zks):
    # the pass a new session (or the next notification) makes: no retry timer involved
    authorizer = await _granted_then_revoked_with_a_failed_read(zks, retry_backoff_s=3600)
    try:
        assert authorizer.authorize(ALICE, AclOperation.READ, topic("t"))  # not yet read
        await authorizer.process_changes(LITERAL_CHANGES_PATH)
        assert not authorizer.authorize(ALICE, AclOperation.READ, topic("t"))
    finally:
        await authorizer.stop()


async def test_a_revocation_whose_read_failed_takes_effect_without_another_change(zks):
    authorizer = await _granted_then_revoked_with_a_failed_read(zks, retry_backoff_s=0.1)
    try:
        await async_wait_until(
            lambda: not authorizer.authorize(ALICE, AclOperation.READ, topic("t")),
            timeout=10, what="the failed pass to be retried and the revocation applied")
    finally:
        await authorizer.stop()
