"""kazoo bridged into asyncio.

kazoo runs its own threads. This wrapper calls kazoo's ``*_async`` methods and settles an
asyncio future from kazoo's callback with ``loop.call_soon_threadsafe`` — so no kazoo call ever
blocks the event loop, and no replog code ever runs on (or blocks) kazoo's callback thread.
Watches and connection-state changes are likewise only *posted* to the loop
(``call_soon_threadsafe``); the owner (controller event queue, broker) acts on them there.

Connection loss, as Kafka's ZooKeeperClient/KafkaZkClient treat it: reads that fail with
ConnectionLoss (the connection to one ensemble member dropped: it died, or lost its quorum) are
asked again once kazoo has moved the *same* session to another member
(KafkaZkClient.retryRequestsUntilConnected); only SessionExpired ends them. Writes are not
retried here: their outcome is unknown, and the caller decides (the controller's partition-state
writes find out which of them the lost attempt applied and send the rest again,
controller/zk_store.py; its other writes re-read everything rather than trust a retry that may
find its own earlier write). kazoo drops every
watch when the connection drops (it fires each once with a NONE event and sends no SetWatches),
so an owner re-arms its watches by reading again with the watch - which these retries make
reliable across the move.

Reconnecting: kazoo's default connection retry backs off exponentially up to an hour, so after
a quorum loss of a few seconds its next attempt came after the restored ensemble had expired
the session (a new leader gives every session one fresh timeout). Like the Java client
(ClientCnxn waits under a second between attempts), every member is tried again within about
a second (RECONNECT_MAX_DELAY_S).

Security (``zookeeper.set.acl``, common/security/zk_auth.py): the client sends its digest
credentials on every connection - kazoo re-sends ``auth_data`` after each reconnect, a new
session's included - and every znode created here (``create``, ``ensure_path``, the chroot,
creates inside ``transaction()``) carries ``ZkSecurity.acls(path)``, Kafka's defaultAcls. Parents
made on the way get their own path's ACL, not the child's (Kafka's createRecursive).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss, NodeExistsError, NoNodeError, SessionExpiredError
from kazoo.protocol.states import KazooState
from kazoo.retry import KazooRetry

from common.security.zk_auth import ZkSecurity

log = logging.getLogger(__name__)

ZK_RETRY_S = 0.5  # between attempts of an operation retried until connected
RECONNECT_MAX_DELAY_S = 1.0  # kazoo's backoff between rounds over the ensemble's members


class AsyncZk:
    def __init__(self, hosts: str, session_timeout_ms: int = 18000,
                 connection_timeout_ms: int = 18000, security: ZkSecurity | None = None):
        self.hosts = hosts
        self.connection_timeout_s = connection_timeout_ms / 1000
        self.security = security or ZkSecurity()
        self.client = KazooClient(
            hosts=hosts, timeout=session_timeout_ms / 1000,
            connection_retry=KazooRetry(max_tries=-1, max_delay=RECONNECT_MAX_DELAY_S),
            **self.security.kazoo_args())
        self._loop: asyncio.AbstractEventLoop | None = None
        self._state_listeners: list[Callable[[str], None]] = []
        self._reconnected: asyncio.Event | None = None  # set while CONNECTED (loop side)

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._reconnected = asyncio.Event()
        await self._loop.run_in_executor(None, self._ensure_chroot)
        self.client.add_listener(self._on_state)
        await self._loop.run_in_executor(None, self.client.start, self.connection_timeout_s)

    def _ensure_chroot(self) -> None:
        """Create the connect string's chroot (``host:port/replog``) if it is missing, as
        Kafka's zookeeper.connect expects an existing one but a fresh ensemble has none.
        Each level gets the chroot's ACL (Kafka's makeSurePersistentPathExists(chroot))."""
        servers, sep, chroot = self.hosts.partition("/")
        if not sep or not chroot.strip("/"):
            if self.security.set_acl:
                # ZooKeeper checks a delete against the parent's ACL: ZooKeeper's own / is
                # open, so its children (/controller, /controller_epoch) stay deletable.
                log.warning("zookeeper.set.acl without a chroot in zookeeper.connect: anyone "
                            "may still delete top-level znodes such as /controller")
            return
        bootstrap = KazooClient(hosts=servers, **self.security.kazoo_args())
        bootstrap.start(self.connection_timeout_s)
        try:
            bootstrap.ensure_path("/" + chroot.strip("/"), acl=self.security.chroot_acls())
        finally:
            bootstrap.stop()
            bootstrap.close()

    async def stop(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(None, self.client.stop)
        finally:
            await loop.run_in_executor(None, self.client.close)

    def on_state_change(self, callback: Callable[[str], None]) -> None:
        """``callback("CONNECTED" | "SUSPENDED" | "LOST")`` runs on the event loop."""
        self._state_listeners.append(callback)

    def _on_state(self, state) -> None:  # kazoo thread: post only
        if self._loop is None:
            return
        name = {KazooState.CONNECTED: "CONNECTED", KazooState.SUSPENDED: "SUSPENDED",
                KazooState.LOST: "LOST"}.get(state, str(state))
        self._loop.call_soon_threadsafe(self._track_connection)
        for cb in list(self._state_listeners):
            self._loop.call_soon_threadsafe(cb, name)

    def _track_connection(self) -> None:
        # Read kazoo's state when this runs, not the posted one: posts may overtake each other
        # in meaning (CONNECTED posted, SUSPENDED already current).
        if self._reconnected is not None:
            if self.connected:
                self._reconnected.set()
            else:
                self._reconnected.clear()

    async def until_reconnected(self) -> None:
        """Until kazoo is connected again (to any member; the session may be a new one if the
        old one expired meanwhile: compare ``session_id``)."""
        await self._until_reconnected()

    async def _until_reconnected(self) -> None:
        while not self.connected:
            if self._reconnected is None:
                await asyncio.sleep(ZK_RETRY_S)
                continue
            try:
                await asyncio.wait_for(self._reconnected.wait(), ZK_RETRY_S)
            except TimeoutError:
                pass  # look at kazoo's state again: a missed post must not hang a read

    @property
    def session_id(self) -> int | None:
        sid = self.client.client_id
        return sid[0] if sid else None

    @property
    def connected(self) -> bool:
        return self.client.state == KazooState.CONNECTED

    # ------------------------------------------------------------------ bridging

    def _await(self, async_result) -> asyncio.Future:
        loop = self._loop or asyncio.get_running_loop()
        fut = loop.create_future()

        def done(res):  # kazoo thread
            try:
                value = res.get_nowait()
            except BaseException as e:  # noqa: BLE001 - delivered to the awaiting task
                loop.call_soon_threadsafe(_settle, fut, None, e)
            else:
                loop.call_soon_threadsafe(_settle, fut, value, None)

        async_result.rawlink(done)
        return fut

    def watcher(self, callback: Callable[[Any], None]) -> Callable[[Any], None]:
        """Wrap ``callback(event)`` so a kazoo watch fires it on the event loop."""
        loop = self._loop

        def fire(event):  # kazoo thread: post only
            if loop is not None and not loop.is_closed():
                loop.call_soon_threadsafe(callback, event)
        return fire

    # ------------------------------------------------------------------ operations

    async def read(self, request: Callable[[], Any]) -> Any:
        """``request()`` (a kazoo ``*_async`` read, e.g. a watch-setting get) awaited; after a
        ConnectionLoss it is sent again once the session is connected again, for as long as
        the session lives (KafkaZkClient.retryRequestsUntilConnected). SessionExpiredError
        and every answer from the server (NoNode, ...) reach the caller."""
        while True:
            try:
                return await self._await(request())
            except ConnectionLoss:
                await self._until_reconnected()

    async def get(self, path: str, watch=None) -> tuple[bytes, Any]:
        return await self.read(lambda: self.client.get_async(path, watch=watch))

    async def get_or_none(self, path: str, watch=None) -> tuple[bytes, Any] | None:
        try:
            return await self.get(path, watch)
        except NoNodeError:
            return None

    async def exists(self, path: str, watch=None):
        return await self.read(lambda: self.client.exists_async(path, watch=watch))

    async def get_children(self, path: str, watch=None) -> list[str]:
        return await self.read(lambda: self.client.get_children_async(path, watch=watch))

    async def create(self, path: str, value: bytes = b"", ephemeral: bool = False,
                     sequence: bool = False, makepath: bool = False) -> str:
        def request():
            return self._await(self.client.create_async(
                path, value, acl=self.security.acls(path), ephemeral=ephemeral,
                sequence=sequence))
        try:
            return await request()
        except NoNodeError:
            if not makepath:
                raise
        await self._make_path(path.rstrip("/").rsplit("/", 1)[0])
        return await request()

    async def _make_path(self, path: str) -> None:
        """Create ``path`` and missing parents, each with its own ACL (Kafka's
        createRecursive: try the node, on NoNode make the parent first)."""
        if path in ("", "/"):
            return
        try:
            await self._create_empty(path)
        except NoNodeError:
            await self._make_path(path.rsplit("/", 1)[0])
            await self._create_empty(path)

    async def _create_empty(self, path: str) -> None:
        try:
            await self._await(self.client.create_async(path, b"",
                                                       acl=self.security.acls(path)))
        except NodeExistsError:
            pass

    async def until_connected(self, op: Callable[[], Any]) -> Any:
        """``await op()``, asked again after a lost connection or session until it gets an
        answer, as Kafka's KafkaZkClient.retryRequestsUntilConnected. Only for operations
        that may safely run twice (creates whose NodeExists the caller accepts, reads): the
        start-up paths: a controller started just before a ZooKeeper restart must not die on
        the ConnectionLoss of its first create (tests/controller/test_zk_store.py::
        test_start_up_paths_survive_a_lost_connection)."""
        while True:
            try:
                return await op()
            except (ConnectionLoss, SessionExpiredError):
                await asyncio.sleep(ZK_RETRY_S)

    async def ensure_path(self, path: str) -> None:
        """Create ``path`` and its parents if missing; retried until connected."""
        await self.until_connected(lambda: self._make_path(path))

    async def set(self, path: str, value: bytes, version: int = -1):
        return await self._await(self.client.set_async(path, value, version))

    async def delete(self, path: str, version: int = -1, recursive: bool = False) -> None:
        if recursive:
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, lambda: self.client.delete(path, version, True))
            return
        await self._await(self.client.delete_async(path, version))

    def transaction(self):
        """A kazoo transaction whose creates carry this client's ACLs."""
        return _AclTransaction(self.client.transaction(), self.security.acls)

    async def commit(self, transaction) -> list:
        """Commit a kazoo transaction; returns its per-operation results (an exception object
        in place of each failed operation, as kazoo reports them)."""
        return await self._await(transaction.commit_async())


class _AclTransaction:
    """kazoo's TransactionRequest with ``create`` given ``acls(path)``; the rest passes through."""

    def __init__(self, transaction, acls: Callable[[str], list]):
        self._transaction = transaction
        self._acls = acls

    def create(self, path: str, value: bytes = b"", acl=None, ephemeral: bool = False,
               sequence: bool = False) -> None:
        self._transaction.create(path, value, acl if acl is not None else self._acls(path),
                                 ephemeral, sequence)

    def __getattr__(self, name: str):
        return getattr(self._transaction, name)


def _settle(fut: asyncio.Future, value, error) -> None:
    if fut.done():
        return
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(value)
