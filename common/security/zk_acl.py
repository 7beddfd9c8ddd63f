"""Which ACL each of replog's znodes carries: Kafka's ``ZkData.defaultAcls``, as a pure function.

With ``zookeeper.set.acl=true`` Kafka creates every znode with

- ``CREATOR_ALL_ACL`` (scheme ``auth``): the server replaces it by every identity the creating
  session authenticated as - ``digest:<user>:<base64 sha1>`` for digest credentials,
  ``sasl:<principal>`` for SASL - so only a session with the same credentials may change,
  delete or create children of the znode;
- plus ``READ_ACL_UNSAFE`` (``world:anyone`` READ) unless the path is *sensitive*:
  ``/config/users``, ``/config/brokers`` (dynamic broker configs may hold passwords) and
  ``/delegation_token/tokens`` are readable by their creator only (``ZkData.sensitivePath``,
  a prefix match);
- except ``/consumers`` (the old consumers wrote their own offsets there), which stays open.

Without ``zookeeper.set.acl`` every znode is open (``OPEN_ACL_UNSAFE``), as ZooKeeper's default.

``SECURE_ROOT_PATHS`` are the trees ``replog zookeeper-security-migration`` walks: Kafka's
``ZkData.SecureRootPaths`` (including the ACL authorizer's ``ZkAclStore`` paths) plus replog's own
``/restart_partitions``. Paths are relative to the chroot, as a chrooted client names them; the
chroot itself and its parents get ``chroot_acls`` (Kafka creates the chroot with
``defaultAcls(chroot)``: creator-all and world-read).

Pure: no I/O, no client. ``kazoo.security`` only supplies the ACL and Id tuples.
"""

from __future__ import annotations

from kazoo.security import (
    ACL,
    CREATOR_ALL_ACL,
    OPEN_ACL_UNSAFE,
    READ_ACL_UNSAFE,
    Id,
    make_digest_acl_credential,
)

# ZkData.ConsumerPathZNode: open even on a secure cluster.
CONSUMERS_PATH = "/consumers"

# ZkData.SensitiveRootPaths: ConfigEntityTypeZNode.path(User), (Broker), DelegationTokensZNode.
SENSITIVE_ROOT_PATHS = ("/config/users", "/config/brokers", "/delegation_token/tokens")

# ZkData.SecureRootPaths ++ ZkAclStore.securePaths, and replog's /restart_partitions.
SECURE_ROOT_PATHS = (
    "/admin", "/brokers", "/cluster", "/config", "/controller", "/controller_epoch",
    "/isr_change_notification", "/latest_producer_id_block", "/log_dir_event_notification",
    "/delegation_token", "/migration", "/feature",
    "/kafka-acl", "/kafka-acl-changes", "/kafka-acl-extended", "/kafka-acl-extended-changes",
    "/restart_partitions",
)


def is_sensitive(path: str) -> bool:
    """``ZkData.sensitivePath``: readable by its creator only (a plain prefix test, as Kafka's
    ``startsWith``)."""
    return any(path.startswith(root) for root in SENSITIVE_ROOT_PATHS)


def default_acls(path: str, secure: bool) -> list[ACL]:
    """The ACL a znode at ``path`` (chroot-relative) is created with (``ZkData.defaultAcls``)."""
    if not secure or path == CONSUMERS_PATH:
        return list(OPEN_ACL_UNSAFE)
    acls = list(CREATOR_ALL_ACL)
    if not is_sensitive(path):
        acls += READ_ACL_UNSAFE
    return acls


def chroot_acls(secure: bool) -> list[ACL]:
    """The chroot and its parents: creator-all and world-read when secure, as Kafka's
    ``makeSurePersistentPathExists(chroot)`` with ``defaultAcls``."""
    return default_acls("/", secure)


def is_secure_path(path: str) -> bool:
    """Whether ``path`` lies in one of the trees the migration tool secures."""
    return any(path == root or path.startswith(root + "/") for root in SECURE_ROOT_PATHS)


def digest_id(credentials: str) -> Id:
    """The identity ZooKeeper gives a session that added digest ``user:password``: the id that
    ``CREATOR_ALL_ACL`` turns into (``digest:user:base64(sha1(user:password))``)."""
    user, sep, password = credentials.partition(":")
    if not sep or not user:
        raise ValueError("digest credentials must be user:password")
    return Id("digest", make_digest_acl_credential(user, password))


def effective_acls(acls: list[ACL], creator: Id) -> list[ACL]:
    """``acls`` as ZooKeeper stores them for a session authenticated as ``creator`` (the
    server's fixupACL: each ``auth`` entry becomes the creator's id). For comparing what a
    znode carries with what the policy asked for."""
    return [ACL(a.perms, creator) if a.id.scheme == "auth" else a for a in acls]
