"""ZooKeeper session faults and chroots, from the client side: ``expire_session`` expires a
kazoo client's session on the *server* (a second connection attaches to the same session id and
password and closes it: the server deletes the session's ephemerals and drops every connection
of it, so the client sees LOST - a real fault, not kazoo's local ``_SESSION_EXPIRED`` event);
``ensure_chroot`` creates a chroot path and returns the chrooted connect string.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState

from harness.zk_server import ZooKeeperServerError


def expire_session(client: KazooClient, hosts: str, timeout: float = 15.0) -> None:
    """Expire `client`'s session on the server and wait until the client has a new one.

    A second connection resumes the same session (id and password) and closes it, which makes
    the server end the session: its ephemeral znodes are deleted and its connections dropped.
    On return the client has seen KazooState.LOST and is CONNECTED again with a new session id.
    `hosts` may carry a chroot; sessions are server-wide, so any path works.
    """
    client_id = client.client_id
    if client_id is None:
        raise ZooKeeperServerError("expire_session needs a connected client")
    old_session_id = client_id[0]
    lost = threading.Event()
    reconnected = threading.Event()

    # Runs on kazoo's connection thread: only set events, never block there.
    def on_state(state: KazooState) -> bool | None:
        if state == KazooState.LOST:
            lost.set()
        elif state == KazooState.CONNECTED and lost.is_set():
            reconnected.set()
            return True  # removes the listener
        return None

    client.add_listener(on_state)
    try:
        deadline = time.monotonic() + timeout
        # kazoo's older harness retried too: the client may not be told at once, e.g. when its
        # connection is mid-reconnect as the ghost closes the session.
        while not lost.is_set():
            if time.monotonic() >= deadline:
                raise ZooKeeperServerError(
                    f"client session 0x{old_session_id:x} was not expired within {timeout}s"
                )
            ghost = KazooClient(hosts, client_id=client_id, timeout=max(timeout, 1.0))
            try:
                ghost.start(timeout=max(deadline - time.monotonic(), 0.5))
                ghost.stop()  # sends closeSession for the shared session
            finally:
                ghost.close()
            lost.wait(min(2.0, max(deadline - time.monotonic(), 0.0)))
        if not reconnected.wait(max(deadline - time.monotonic(), 0.0)):
            raise ZooKeeperServerError(
                f"client did not reconnect within {timeout}s after its session expired"
            )
    finally:
        client.remove_listener(on_state)
    new_id = client.client_id
    if new_id is None or new_id[0] == old_session_id:
        raise ZooKeeperServerError(
            f"client still on session 0x{old_session_id:x} after expiry (client id {new_id!r})"
        )


def ensure_chroot(hosts: str, path: str, timeout: float = 15.0, *,
                  auth_data: Sequence[tuple[str, str]] = (), acl=None) -> str:
    """Create `path` (and its parents) on the ensemble at `hosts`; return `hosts` + `path`.
    `auth_data` and `acl`: the credentials to send and the ACL of the levels created
    (kazoo's; zookeeper.set.acl's chroot ACL, common/security/zk_auth.py).

    kazoo does not create a chroot itself, and a client chrooted to a missing path fails its
    first operation, so tests and `replog cluster up` create it first with an unchrooted client.
    """
    if not path.startswith("/") or path == "/" or path.endswith("/"):
        raise ValueError(f"chroot must be an absolute znode path like /replog, got {path!r}")
    client = KazooClient(hosts, timeout=timeout, auth_data=list(auth_data))
    try:
        client.start(timeout=timeout)
        client.ensure_path(path, acl=acl)
        client.stop()
    finally:
        client.close()
    return hosts.rstrip("/") + path
