"""How replog's processes authenticate to ZooKeeper, and whether they set ACLs.

Kafka's ZooKeeper-era brokers authenticate by SASL (a JAAS file's ``Client`` section, named by
``-Djava.security.auth.login.config``) and set ACLs when ``zookeeper.set.acl=true``. replog uses
ZooKeeper's *digest* scheme instead (docs/security-zookeeper.md says why: it needs
nothing configured on the ZooKeeper server, and kazoo sends it again on every (re)connection).
Its credentials are replog's own properties:

- ``zookeeper.auth.digest=user:password``, or
- ``zookeeper.auth.digest.file=PATH``: a file holding ``user:password`` (keeps the password out
  of the properties file and the process list); one of the two, not both.

Every process of a cluster must use the same credentials: the znodes are created with
creator-all, so the controller can change what a broker created and the other way round (Kafka
asks the same: one principal for all brokers).

``zookeeper.set.acl=true`` without credentials is refused at start-up, as Kafka refuses it
without a JAAS login section ("zookeeper.set.acl is true, but ... no JAAS configuration").
Credentials without ``zookeeper.set.acl`` authenticate but create open znodes: the first step of
migrating a running cluster (docs/security.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kazoo.security import ACL

from common.errors import ConfigError
from common.security.zk_acl import chroot_acls, default_acls, digest_id

SET_ACL = "zookeeper.set.acl"
DIGEST = "zookeeper.auth.digest"
DIGEST_FILE = "zookeeper.auth.digest.file"


@dataclass(frozen=True)
class ZkSecurity:
    """What a ZooKeeper client of replog's sends and sets. ``ZkSecurity()`` is an open,
    unauthenticated client (ZooKeeper's defaults)."""

    set_acl: bool = False
    digest: str | None = field(default=None, repr=False)  # "user:password"

    def __post_init__(self) -> None:
        if self.digest is not None:
            digest_id(self.digest)  # ValueError for anything but user:password
        if self.set_acl and self.digest is None:
            raise ValueError(f"{SET_ACL} is true but no ZooKeeper credentials are configured "
                             f"({DIGEST} or {DIGEST_FILE})")

    @property
    def auth_data(self) -> list[tuple[str, str]]:
        """kazoo's ``auth_data``: sent on every connection, a new session's included."""
        return [("digest", self.digest)] if self.digest is not None else []

    def kazoo_args(self) -> dict[str, Any]:
        """Keyword arguments for ``KazooClient(hosts, **kazoo_args())``."""
        return {"auth_data": self.auth_data} if self.digest is not None else {}

    def acls(self, path: str) -> list[ACL]:
        return default_acls(path, self.set_acl)

    def chroot_acls(self) -> list[ACL]:
        return chroot_acls(self.set_acl)


def read_digest_file(path: str) -> str:
    try:
        text = Path(path).read_text(encoding="utf-8").strip()
    except OSError as e:
        raise ConfigError(f"{DIGEST_FILE}: cannot read {path}: {e.strerror}") from None
    return text


def zk_security(config: Mapping[str, Any]) -> ZkSecurity:
    """The ZooKeeper security of a broker, controller or tool config (missing keys: off), typed
    (common/config.py) or raw property strings (a local cluster's overrides). Raises
    ConfigError (one line, naming the key) for a bad combination."""
    set_acl = config.get(SET_ACL, False)
    if isinstance(set_acl, str):
        if set_acl.strip().lower() not in ("true", "false"):
            raise ConfigError(f"{SET_ACL}: must be true or false")
        set_acl = set_acl.strip().lower() == "true"
    digest = config.get(DIGEST)
    digest_file = config.get(DIGEST_FILE)
    if digest and digest_file:
        raise ConfigError(f"set one of {DIGEST} and {DIGEST_FILE}, not both")
    if digest_file:
        digest = read_digest_file(digest_file)
    try:
        return ZkSecurity(bool(set_acl), digest or None)
    except ValueError as e:
        key = DIGEST_FILE if digest_file else DIGEST
        msg = str(e) if "set.acl" in str(e) else f"{key}: {e}"
        raise ConfigError(msg) from None
