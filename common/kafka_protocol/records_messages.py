"""DeleteRecords (Kafka API 21, KIP-107), served by each partition's leader. Described from
Kafka's message JSON files (see messages.py): DeleteRecordsRequest.json and
DeleteRecordsResponse.json, versions 0-2, flexible from 2; every version is served (v1 is v0,
v2 v1 in the flexible encoding)."""

from __future__ import annotations

from common.kafka_protocol.api import Api, make_api
from common.kafka_protocol.schema import array, f, struct

DELETE_RECORDS = 21

DELETE_RECORDS_REQUEST = struct(
    f("topics", array(struct(
        f("name", "string"),
        f("partitions", array(struct(
            f("partition_index", "int32"),
            f("offset", "int64"))))))),
    f("timeout_ms", "int32"),
)
DELETE_RECORDS_RESPONSE = struct(
    f("throttle_time_ms", "int32"),
    f("topics", array(struct(
        f("name", "string"),
        f("partitions", array(struct(
            f("partition_index", "int32"),
            f("low_watermark", "int64"),
            f("error_code", "int16"))))))),
)

APIS: list[Api] = [
    make_api(DELETE_RECORDS, "DeleteRecords", "0-2", "2+", DELETE_RECORDS_REQUEST,
             DELETE_RECORDS_RESPONSE),
]
