"""The group coordinator's gauges, computed at scrape time from the groups this broker
coordinates (docs/groups.md):

- Kafka's GroupMetadataManager MBeans as the JMX-exporter rules name them
  (``kafka.coordinator.group:type=GroupMetadataManager,name=NumGroups`` ->
  ``kafka_coordinator_group_groupmetadatamanager_numgroups``): NumGroups, NumOffsets and
  NumGroups<State> for each state;
- kafka_exporter's group gauges, with its names and labels, so lag dashboards work unchanged:
  ``kafka_consumergroup_members{consumergroup}``,
  ``kafka_consumergroup_current_offset{consumergroup,topic,partition}`` and
  ``kafka_consumergroup_lag{consumergroup,topic,partition}``. The lag is the partition's high
  watermark minus the committed offset (kafka_exporter's newest offset minus the committed one),
  given for the partitions this broker leads - the coordinator knows no other broker's high
  watermark; kafka_exporter itself, asking every leader, still sees the whole group.
"""

from __future__ import annotations

from broker.group.coordinator import GroupCoordinator
from broker.group.state import GroupState
from broker.metrics import BrokerMetrics
from common.names import TopicPartition

_PREFIX = "kafka_coordinator_group_groupmetadatamanager_"


def register_group_gauges(m: BrokerMetrics, coordinator: GroupCoordinator, rm) -> None:
    core = coordinator.core

    def groups():
        return list(core.groups.values())

    m.gauge(_PREFIX + "numgroups", "groups this broker coordinates", lambda: len(groups()))
    m.gauge(_PREFIX + "numoffsets", "committed offsets of the groups this broker coordinates",
            lambda: sum(len(g.offsets) for g in groups()))
    for state in GroupState:
        m.gauge(_PREFIX + f"numgroups{state.value.lower()}",
                f"groups this broker coordinates in state {state.value}",
                lambda s=state: sum(1 for g in groups() if g.state is s))
    m.labelled_gauge("kafka_consumergroup_members", "members of the group", "consumergroup",
                     lambda: {g.group_id: len(g.members) for g in groups()})

    def offsets():
        return {(g.group_id, tp.topic, str(tp.partition)): c.offset
                for g in groups() for tp, c in list(g.offsets.items())}

    def lag():
        out = {}
        for (group, topic, partition), offset in offsets().items():
            p = rm.partitions.get(TopicPartition(topic, int(partition)))
            if p is not None and p.is_leader:
                out[(group, topic, partition)] = max(0, p.high_watermark - offset)
        return out

    labels = ("consumergroup", "topic", "partition")
    m.labelled_gauge("kafka_consumergroup_current_offset",
                     "the group's committed offset of the partition", labels, offsets)
    m.labelled_gauge("kafka_consumergroup_lag",
                     "the partition's high watermark minus the group's committed offset "
                     "(partitions this broker leads)", labels, lag)
