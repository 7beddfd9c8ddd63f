"""CreatePartitions (Kafka API 37), forwarded to replog's controller. Described from Kafka's
message JSON files (see messages.py): CreatePartitionsRequest.json and
CreatePartitionsResponse.json, versions 0-3, flexible from 2.

Every version is served: v1 is v0, v2 is v0 in the flexible encoding and v3 v2 that may
answer THROTTLING_QUOTA_EXCEEDED (KIP-599; replog has no controller mutation quota, so it
never does). kafka-python 3.0.12 asks for up to v3; librdkafka 2.16 (confluent-kafka) picks
the highest version both sides list.
"""

from __future__ import annotations

from common.kafka_protocol.api import Api, make_api
from common.kafka_protocol.schema import array, f, struct

CREATE_PARTITIONS = 37

CREATE_PARTITIONS_REQUEST = struct(
    f("topics", array(struct(
        f("name", "string"),
        f("count", "int32"),
        f("assignments", array(struct(
            f("broker_ids", array("int32")))), nullable="0+", default=None)))),
    f("timeout_ms", "int32"),
    f("validate_only", "bool"),
)
CREATE_PARTITIONS_RESPONSE = struct(
    f("throttle_time_ms", "int32"),
    f("results", array(struct(
        f("name", "string"),
        f("error_code", "int16"),
        f("error_message", "string", nullable="0+", default=None)))),
)

APIS: list[Api] = [
    make_api(CREATE_PARTITIONS, "CreatePartitions", "0-3", "2+", CREATE_PARTITIONS_REQUEST,
             CREATE_PARTITIONS_RESPONSE),
]
