"""DeleteRecords (API 21, KIP-107) on the Kafka listener: translation only, around
broker/apis/log_dirs.py (the code the gRPC DeleteRecords runs too).

Kafka's KafkaApis.handleDeleteRecordsRequest: Delete on each topic, else
TOPIC_AUTHORIZATION_FAILED for its partitions; a topic this broker does not know is
UNKNOWN_TOPIC_OR_PARTITION; the rest go to the replica manager, which answers each partition
with its low watermark or its error (clients send each partition to its leader).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from broker.apis import log_dirs as apis_log_dirs
from broker.kafka_api_context import KafkaApiContext
from common.kafka_protocol.api import ApiKey
from common.names import TopicPartition

Handler = Callable[[dict, int], Awaitable[dict | None]]


def handlers(listener: KafkaApiContext) -> dict[int, Handler]:
    async def handle(req: dict, _version: int) -> dict:
        return await _delete_records(listener, req)
    return {ApiKey.DELETE_RECORDS: handle}


async def _delete_records(listener: KafkaApiContext, req: dict) -> dict:
    offsets = {TopicPartition(t["name"], p["partition_index"]): p["offset"]
               for t in req["topics"] for p in t["partitions"]}
    results = await apis_log_dirs.delete_records(listener.api_context(), offsets,
                                                 req["timeout_ms"])
    topics: dict[str, list[dict]] = {}
    for tp, (code, low, _) in results.items():
        topics.setdefault(tp.topic, []).append(
            {"partition_index": tp.partition, "low_watermark": low, "error_code": int(code)})
    return {"throttle_time_ms": 0, "topics": [{"name": n, "partitions": ps}
                                              for n, ps in topics.items()]}
