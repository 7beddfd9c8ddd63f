"""The Kafka APIs replog's listener serves: for each, the versions its ApiVersions answer lists
and the generated request and response codecs (common/kafka_protocol/generated/, from Kafka's
own message JSON files in proto/kafka/message/; docs/kafka-protocol.md).

Which versions are served is replog's decision, made here; what each version holds is Kafka's,
in the JSON files. The reasons for the ranges:
- the client-facing APIs: Produce from v3 and Fetch from v4 (older versions carry message
  format v0/v1 record sets, which Kafka converts and replog does not store: it keeps v2
  batches only); Fetch up to v12 (v13 names topics by id, KIP-516) and Produce up to v9 (v10
  adds KIP-951's leader hints), both left for a later phase;
- the admin APIs forwarded to replog's controller (as a KRaft broker forwards them, KIP-590):
  what the clients ask for. librdkafka 2.16 (confluent-kafka) CreateTopics 0-4, DeleteTopics
  0-4, ElectLeaders 0-2; aiokafka 0.14 CreateTopics and DeleteTopics 0-3; kafka-python 3.0.12
  CreateTopics 0-7, DeleteTopics 0-6 (by topic id, KIP-516), DescribeCluster 0-2 (v2:
  IncludeFencedBrokers, KIP-1073), ElectLeaders 0-2, AlterPartitionReassignments 0-1 (KIP-860's
  AllowReplicationFactorChange), ListPartitionReassignments 0 and CreatePartitions 0-3 (v3 may
  answer THROTTLING_QUOTA_EXCEEDED, KIP-599; replog has no controller mutation quota, so it
  never does);
- the APIs a broker answers itself (configs, log dirs, ACLs through its authorizer,
  DeleteRecords on each partition's leader): every version Kafka 3.x has;
- the group coordinator's (broker/group/kafka_apis.py): the files' validVersions, every version
  today's clients ask for;
- the APIs of features replog does not have (transactions, SASL): the files' validVersions, so
  every client version can be answered with the exact error a Kafka broker gives when the
  feature is unavailable (broker/kafka_unserved.py), and clients fail clearly or fall back
  instead of losing their connection. InitProducerId (22) is deliberately
  absent: a broker that does not list it is what every client recognises as "idempotence not
  supported" (librdkafka's fatal ``__UNSUPPORTED_FEATURE``, kafka-python's and aiokafka's
  IncompatibleBrokerVersion), while any error code a listed InitProducerId could carry either
  makes the producer retry forever (the coordinator errors) or names a cause that is not true
  (the authorization errors).
"""

from __future__ import annotations

from dataclasses import dataclass

from common.kafka_protocol.codec import Codec
from common.kafka_protocol.generated import API_NAMES, CODECS, ApiKey
from common.kafka_protocol.schema import Versions, versions

__all__ = ["APIS", "Api", "ApiKey"]

K = ApiKey
SERVED: dict[int, str] = {
    # client-facing
    K.PRODUCE: "3-9",
    K.FETCH: "4-12",
    K.LIST_OFFSETS: "0-7",
    K.METADATA: "0-12",
    K.API_VERSIONS: "0-4",
    K.OFFSET_FOR_LEADER_EPOCH: "0-4",
    # forwarded to the controller: topics, partitions, elections, reassignments, the cluster
    K.CREATE_TOPICS: "0-7",
    K.DELETE_TOPICS: "0-6",
    K.ELECT_LEADERS: "0-2",
    K.ALTER_PARTITION_REASSIGNMENTS: "0-1",
    K.LIST_PARTITION_REASSIGNMENTS: "0",
    K.DESCRIBE_CLUSTER: "0-2",
    K.CREATE_PARTITIONS: "0-3",
    # answered by this broker: configs, log dirs, DeleteRecords, ACLs
    K.DESCRIBE_CONFIGS: "0-4",
    K.INCREMENTAL_ALTER_CONFIGS: "0-1",
    K.ALTER_CONFIGS: "0-2",
    K.DESCRIBE_LOG_DIRS: "0-4",
    K.ALTER_REPLICA_LOG_DIRS: "0-2",
    K.DELETE_RECORDS: "0-2",
    K.DESCRIBE_ACLS: "0-3",
    K.CREATE_ACLS: "0-3",
    K.DELETE_ACLS: "0-3",
    # the group coordinator (broker/group/kafka_apis.py)
    K.OFFSET_COMMIT: "0-9",
    K.OFFSET_FETCH: "0-9",
    K.FIND_COORDINATOR: "0-6",
    K.JOIN_GROUP: "0-9",
    K.HEARTBEAT: "0-4",
    K.LEAVE_GROUP: "0-5",
    K.SYNC_GROUP: "0-5",
    K.DESCRIBE_GROUPS: "0-5",
    K.LIST_GROUPS: "0-5",
    K.DELETE_GROUPS: "0-2",
    K.OFFSET_DELETE: "0",
    # features replog does not have, answered with a Kafka broker's error for them
    K.SASL_HANDSHAKE: "0-1",
    K.ADD_PARTITIONS_TO_TXN: "0-5",
    K.ADD_OFFSETS_TO_TXN: "0-4",
    K.END_TXN: "0-5",
    K.TXN_OFFSET_COMMIT: "0-4",
    K.SASL_AUTHENTICATE: "0-2",
}


@dataclass(frozen=True)
class Api:
    key: int
    name: str
    served: Versions
    request: Codec
    response: Codec


def _api(key: int, served: str) -> Api:
    v = versions(served)
    request, response = CODECS[(key, "request")], CODECS[(key, "response")]
    for c in (request, response):
        if not (c.valid.lo <= v.lo and v.hi <= c.valid.hi):
            raise ValueError(f"{c.name} serves {served} beyond its JSON's validVersions")
    return Api(key, API_NAMES[key], v, request, response)


APIS: dict[int, Api] = {k: _api(k, s) for k, s in sorted(SERVED.items())}
