"""Topic overrides and dynamic broker configs as this broker applies them: loading from ZooKeeper
(with retries while unreadable), and re-deriving each partition's min ISR at once
(common.dynamic_config.configured_min_isr, the resolver the controller shares).

A part of ``broker.replica_manager.ReplicaManager`` (split by family); it
runs on the ReplicaManager's own state (``partitions``, ``log_manager``, ``events``, ...).
"""

from __future__ import annotations

import asyncio

from broker.alter_log_dirs import ALTER_LOG_DIRS_RATE
from broker.replication_quota import (
    rate_from,
)
from common.dynamic_config import configured_min_isr
from common.zk_layout import MalformedZnode


class TopicConfigState:
    async def _topic_config(self, topic: str) -> dict[str, str] | None:
        """The topic's overrides, read from ZooKeeper the first time; None while unreadable
        (never ``{}``: that would silently mean the broker's weaker default)."""
        if topic not in self.topic_configs:
            if self._load_topic_config is None:
                self.topic_configs[topic] = {}
            else:
                await self._load_and_apply_topic_config(topic)
        return self.topic_configs.get(topic)

    async def reload_topic_config(self, topic: str) -> None:
        """A change notification named ``topic`` (broker/config_manager.py, Kafka's
        TopicConfigHandler): re-read it and apply it to the topic's partitions. A topic this
        broker neither holds nor is loading is skipped - it reads the config when it gets one."""
        if self._load_topic_config is None:
            return
        loading = self._config_tickets.get(topic, 0) > self._config_applied.get(topic, 0)
        if topic not in self.topic_configs and not loading and \
                not any(tp.topic == topic for tp in self.partitions):
            return
        await self._load_and_apply_topic_config(topic)

    async def _load_and_apply_topic_config(self, topic: str) -> bool:
        # Loads may overlap (LeaderAndIsr and a notification): one started later read a newer
        # state, so an earlier one finishing after it must not overwrite it.
        ticket = self._config_tickets[topic] = self._config_tickets.get(topic, 0) + 1
        try:
            cfg = await self._load_topic_config(topic)
        except MalformedZnode as e:
            # Kafka's ZkNodeChangeNotificationListener logs a change it cannot process and
            # goes on: the config held stays (none held: unknown, the strictest). Not retried,
            # the znode will not mend itself; the next change notification reads it again.
            if self._config_applied.get(topic, 0) < ticket:
                self.events.error("topic_config_malformed", topic=topic, error=str(e)[:300])
                if topic not in self.topic_configs:
                    self.apply_topic_config(topic, None)
            return False
        except Exception as e:  # noqa: BLE001 - ZooKeeper unreachable or znode unreadable
            if self._config_applied.get(topic, 0) < ticket:
                self.events.error("topic_config_unavailable", topic=topic, error=str(e)[:200],
                                  min_isr="replication factor until read")
                self.apply_topic_config(topic, None)
                self._retry_topic_config(topic)
            return False
        if self._config_applied.get(topic, 0) < ticket:
            self._config_applied[topic] = ticket
            self.apply_topic_config(topic, cfg)
        return True

    def _retry_topic_config(self, topic: str) -> None:
        task = self._config_retries.get(topic)
        if task is None or task.done():
            self._config_retries[topic] = asyncio.ensure_future(self._retry_loop(topic))

    async def _retry_loop(self, topic: str) -> None:
        delay = 0.2
        while topic not in self.topic_configs:
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)
            if await self._load_and_apply_topic_config(topic):
                self.events.info("topic_config_recovered", topic=topic,
                                 config=self.topic_configs.get(topic))
                return

    def apply_topic_config(self, topic: str, cfg: dict[str, str] | None) -> None:
        """Hold ``cfg`` (None: unknown) as the topic's overrides and re-derive its partitions'
        min ISR at once: the next acks=all produce is checked against it (Kafka's
        TopicConfigHandler updating the log config in place)."""
        if cfg is None:
            self.topic_configs.pop(topic, None)
        else:
            self.topic_configs[topic] = dict(cfg)
        self.quotas.apply_topic_config(topic, cfg)
        self._refresh_min_isr(lambda tp: tp.topic == topic)
        if cfg is not None:
            # Kafka's TopicConfigHandler -> LogManager.updateTopicConfig: the topic's logs take
            # the new log config in place (segment size and age, retention, flush interval,
            # index interval, max.message.bytes). An unreadable config keeps the last one.
            lc = self.log_config_for(topic)
            for tp, log in self.log_manager.logs_of_topic(topic):  # noqa: B007
                log.config = lc

    def log_config_for(self, topic: str):
        """The topic's log config: the broker's under the topic's overrides."""
        return self.log_manager.config.with_topic_overrides(self.topic_configs.get(topic))

    def apply_broker_config(self, dynamic: dict[str, str] | None,
                            default: dict[str, str] | None = None) -> None:
        """This broker's dynamic configs changed (None: unknown); topics without their own
        override follow them. ``dynamic`` is /config/brokers/<id> over <default>, ``default``
        the cluster-wide entity alone (omitted: ``dynamic`` is that entity)."""
        self.broker_dynamic_config = None if dynamic is None else dict(dynamic)
        default = dynamic if default is None else default
        self.broker_default_config = None if default is None else dict(default)
        self.quotas.apply_broker_config(dynamic, self.config)
        # KIP-113's move throttle is a dynamic broker config too (Kafka's
        # BrokerConfigHandler updates the alter-log-dirs quota alongside the others).
        bound = rate_from(dynamic, self.config, ALTER_LOG_DIRS_RATE)
        if bound is not None:
            self.alter_log_dirs.quota.update_quota(bound)
        if self.fetcher_manager is not None:
            stream = (dynamic or {}).get("replica.fetch.stream.enable")
            self.fetcher_manager.set_fetch_stream(
                self.config["replica.fetch.stream.enable"] if stream is None
                else stream.strip().lower() == "true")
        self._refresh_min_isr(lambda tp: True)

    def _refresh_min_isr(self, which) -> None:
        for tp, p in list(self.partitions.items()):
            if not which(tp):
                continue
            new = self._min_isr(tp.topic, len(p.replicas))
            if new != p.min_isr:
                self.events.info("min_isr_changed", partition=str(tp), old=p.min_isr, new=new)
                p.min_isr = new
                if p.is_leader:
                    p.maybe_advance_hw()  # a lower min ISR may unfreeze the HW

    def _min_isr(self, topic: str, replication_factor: int) -> int:
        return configured_min_isr(self.topic_configs.get(topic), self.broker_default_config,
                                  self.config["min.insync.replicas"], replication_factor)
