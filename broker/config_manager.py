"""Dynamic configs on a broker: serving DescribeConfigs / IncrementalAlterConfigs and applying
changes as they arrive. The ZooKeeper shell around common/dynamic_config.py (the checks and
descriptions) and broker/config_changes.py (which notifications to act on).

Kafka's ZooKeeper-mode design, followed here:
- Writes (ZkAdminManager.incrementalAlterConfigs -> AdminZkClient.changeConfigs): the entity's
  znode (``/config/topics/<t>``, ``/config/brokers/<id>``, ``/config/brokers/<default>``) and a
  ``/config/changes/config_change_<seq>`` notification. replog commits both in one ZooKeeper
  transaction, conditional on the znode version read (a concurrent alter makes it retry) and on
  the topic still existing, so a change is never half-applied or lost.
- Reads for DescribeConfigs come from ZooKeeper, not from this broker's cache, so an alter is
  visible to the next describe through any broker.
- Every broker watches ``/config/changes`` (ZkConfigManager / ZkNodeChangeNotificationListener),
  reloads each entity named by a notification above the last one it processed, and hands the
  config to the replica manager (``reload_topic_config`` / ``apply_broker_config``), which
  re-derives min ISR at once. Notifications older than 15 minutes are deleted by whichever
  broker sees them. A ZooKeeper error never leaves a weaker setting in force: the entity
  becomes unknown (strictest min ISR) and is re-read in the background.

The kazoo watch only wakes an asyncio event (common/zk_async.py posts it to the loop); all work runs on
the event loop, in one task, so notifications are applied in sequence order.
"""  # noqa: E501

from __future__ import annotations

import asyncio

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from broker import config_changes as cc
from common import dynamic_config as dc
from common import zk_layout as zl
from common.clock import wall_ms
from common.config import Config
from common.errors import ConfigError, ErrorCode, ReplogError
from common.zk_async import AsyncZk

ALTER_ATTEMPTS = 5  # read-modify-write retries when another alter wins the version race


class ConfigManager:
    def __init__(self, zk: AsyncZk, broker_id: int, config: Config, rm, events,
                 clock=wall_ms,
                 expiration_ms: int = cc.CHANGE_EXPIRATION_MS):
        self.zk = zk
        self.broker_id = broker_id
        self.config = config
        self.rm = rm
        self.events = events
        self.clock = clock
        self.expiration_ms = expiration_ms
        self.last_seq = -1
        self.per_broker: dict[str, str] | None = {}  # /config/brokers/<id>; None: unknown
        self.default: dict[str, str] | None = {}  # /config/brokers/<default>; None: unknown
        self._wake = asyncio.Event()
        self._watch = None
        self._broker_retry: asyncio.Task | None = None

    # ------------------------------------------------------------------ start-up and changes

    async def start(self) -> None:
        """Before the broker registers: note the newest notification, then read this broker's
        dynamic configs (a change after the first read has a newer notification, so none is
        missed). A ZooKeeper error here fails start-up, as Kafka's DynamicBrokerConfig does."""
        self._watch = self.zk.watcher(lambda _event: self._wake.set())
        for path in (zl.CONFIG_CHANGES, zl.CONFIG_TOPICS, zl.CONFIG_BROKERS):
            await self.zk.ensure_path(path)  # transactions cannot create parents
        children = await self.zk.get_children(zl.CONFIG_CHANGES, watch=self._watch)
        self.last_seq = cc.last_sequence(children)
        try:
            await self._load_broker_configs()
        except zl.MalformedZnode as e:
            # not a ZooKeeper error: the broker starts with the strictest settings until a
            # change notification brings a config it can read
            self._malformed(e)
            self.per_broker = self.default = None
            self.rm.apply_broker_config(None)

    def wake(self) -> None:
        """Process notifications now (also after a new ZooKeeper session: its watches are
        gone, and changes may have been missed)."""
        self._wake.set()

    async def run(self) -> None:
        """The notification loop (run supervised by the server)."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self.process_changes()
            except Exception as e:  # noqa: BLE001 - ZooKeeper unavailable: try again shortly
                self.events.error("config_changes_unreadable", error=str(e)[:200])
                await asyncio.sleep(1.0)
                self._wake.set()

    async def process_changes(self) -> None:
        children = await self.zk.get_children(zl.CONFIG_CHANGES, watch=self._watch)
        for seq, name in cc.changes_to_process(children, self.last_seq):
            got = await self.zk.get_or_none(f"{zl.CONFIG_CHANGES}/{name}")
            if got is not None:
                try:
                    entity_type, entity = zl.decode_config_change(got[0])
                except ValueError as e:
                    self.events.error("config_change_malformed", node=name, error=str(e))
                else:
                    await self._reload(entity_type, entity, seq)
            self.last_seq = seq
        await self._purge(children)

    async def _reload(self, entity_type: str, name: str, seq: int) -> None:
        self.events.info("config_change", entity_type=entity_type, entity=name, seq=seq)
        if entity_type == "topics":
            await self.rm.reload_topic_config(name)
        elif cc.affects_broker(entity_type, name, self.broker_id):
            await self._reload_broker_configs()
            if self.per_broker is not None:  # read and applied (else retried, logged there)
                self.events.info("broker_config_applied", seq=seq,
                                 config={**self.default, **self.per_broker})

    async def _purge(self, children: list[str]) -> None:
        created = []
        for name in children:
            seq = zl.config_change_seq(name)
            if seq is None or seq > self.last_seq:
                continue
            stat = await self.zk.exists(f"{zl.CONFIG_CHANGES}/{name}")
            if stat is not None:
                created.append((name, stat.ctime))
        for name in cc.obsolete_changes(created, self.clock(), self.last_seq,
                                        self.expiration_ms):
            try:
                await self.zk.delete(f"{zl.CONFIG_CHANGES}/{name}")
            except NoNodeError:
                pass  # another broker pruned it first

    # ------------------------------------------------------------------ broker-level configs

    async def _read_entity(self, entity_type: str, name: str) -> tuple[dict[str, str], int]:
        """(config, znode version; -1 when there is no znode yet). A znode no decoder reads
        raises MalformedZnode naming it: DescribeConfigs and IncrementalAlterConfigs refuse
        the resource with that line, a change notification is skipped."""
        path = zl.entity_config_path(entity_type, name)
        got = await self.zk.get_or_none(path)
        if got is None:
            return {}, -1
        return zl.decode_at(path, got[0], zl.decode_entity_config), got[1].version

    def _malformed(self, e: zl.MalformedZnode) -> None:
        self.events.error("config_znode_malformed", error=str(e)[:300])

    async def _load_broker_configs(self) -> None:
        per_broker = (await self._read_entity("brokers", str(self.broker_id)))[0]
        default = (await self._read_entity("brokers", dc.DEFAULT_BROKER))[0]
        self.per_broker, self.default = per_broker, default  # both read, or neither held
        self.rm.apply_broker_config({**self.default, **self.per_broker}, default=self.default)

    async def _reload_broker_configs(self) -> None:
        try:
            await self._load_broker_configs()
        except zl.MalformedZnode as e:
            # Kafka's ZkNodeChangeNotificationListener logs a notification it cannot process
            # and goes on: the configs held stay in force (no retry: the znode will not mend
            # itself; the next notification reads it again)
            self._malformed(e)
        except Exception as e:  # noqa: BLE001 - unknown until read: strictest, retried
            self.events.error("broker_config_unavailable", error=str(e)[:200],
                              min_isr="replication factor until read")
            self.per_broker = self.default = None
            self.rm.apply_broker_config(None)
            if self._broker_retry is None or self._broker_retry.done():
                self._broker_retry = asyncio.ensure_future(self._retry_broker_configs())

    async def _retry_broker_configs(self) -> None:
        delay = 0.2
        while True:
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)
            try:
                await self._load_broker_configs()
            except Exception as e:  # noqa: BLE001 - still unreadable: keep the strictest
                self.events.warning("broker_config_unavailable", error=str(e)[:200])
            else:
                self.events.info("broker_config_recovered")
                return

    # ------------------------------------------------------------------ DescribeConfigs

    def _check_broker_resource(self, name: str) -> str:
        """The ZooKeeper entity of a broker resource; only this broker or the default entity
        (Kafka's ZkAdminManager: per-broker requests go to that broker)."""
        if name in ("", dc.DEFAULT_BROKER):
            return dc.DEFAULT_BROKER
        if name != str(self.broker_id):
            raise dc.InvalidRequestError(f"Unexpected broker id, expected {self.broker_id} or "
                                         f"empty string, but received {name}")
        return name

    async def _check_topic(self, topic: str) -> None:
        if await self.zk.exists(zl.topic_path(topic)) is None:
            raise UnknownTopicError(f"The topic '{topic}' does not exist.")

    async def describe(self, entity_type: str, name: str, keys: list[str]
                       ) -> list[dc.ConfigEntry]:
        """Entries of one resource, read from ZooKeeper; raises a ReplogError carrying the
        Kafka error code (UnknownTopicError, InvalidRequestError)."""
        per_broker, _ = await self._read_entity("brokers", str(self.broker_id))
        default, _ = await self._read_entity("brokers", dc.DEFAULT_BROKER)
        if entity_type == "topics":
            await self._check_topic(name)
            overrides, _ = await self._read_entity("topics", name)
            return dc.describe_topic(overrides, per_broker, default, self.config, keys)
        entity = self._check_broker_resource(name)
        return dc.describe_broker(None if entity == dc.DEFAULT_BROKER else per_broker, default,
                                  self.config, keys)

    # ------------------------------------------------------------------ IncrementalAlterConfigs

    async def alter(self, entity_type: str, name: str, alterations: list[dc.Alteration],
                    validate_only: bool = False, replace: bool = False) -> None:
        """Apply ``alterations`` to one resource, or raise with nothing written. ``replace``:
        to none of its current overrides (the legacy AlterConfigs' whole-resource replace)."""
        if entity_type == "topics":
            await self._check_topic(name)
            entity, check = name, dc.check_topic_config
        else:
            entity = self._check_broker_resource(name)
            check = (dc.check_broker_config if entity == dc.DEFAULT_BROKER
                     else dc.check_broker_entity_config)
        for _ in range(ALTER_ATTEMPTS):
            current, version = await self._read_entity(entity_type, entity)
            new = dc.alter({} if replace else current, alterations, check)
            if validate_only:
                return
            if await self._write(entity_type, entity, new, version):
                self.events.info("config_altered", entity_type=entity_type, entity=entity,
                                 config=new)
                return
        raise ConfigError(f"{entity_type}/{entity}: the config kept changing under this "
                          f"request; try again")

    async def _write(self, entity_type: str, entity: str, config: dict[str, str],
                     version: int) -> bool:
        """One transaction: the config znode (at the version read) and the notification.
        False when another writer got there first."""
        path = zl.entity_config_path(entity_type, entity)
        tx = self.zk.transaction()
        if entity_type == "topics":
            tx.check(zl.topic_path(entity), -1)  # deleted meanwhile: fail, write nothing
        data = zl.encode_entity_config(config)
        if version < 0:
            tx.create(path, data)
        else:
            tx.set_data(path, data, version)
        tx.create(f"{zl.CONFIG_CHANGES}/{zl.CONFIG_CHANGE_PREFIX}",
                  zl.encode_config_change(entity_type, entity), sequence=True)
        results = await self.zk.commit(tx)
        errors = [r for r in results if isinstance(r, Exception)]
        if not errors:
            return True
        if entity_type == "topics" and isinstance(results[0], NoNodeError):
            raise UnknownTopicError(f"The topic '{entity}' does not exist.")
        if any(isinstance(e, (BadVersionError, NodeExistsError, NoNodeError)) for e in errors):
            return False
        raise errors[0]


class UnknownTopicError(ReplogError):
    error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
