"""replog's client library: asyncio producer, consumer and admin client over gRPC.

Kafka's client model and names, on replog's wire contract (proto/replog/v1/replog.proto):

- :class:`AdminClient` — topics (create/delete/describe/list), cluster description, leader
  elections, reassignments, log dirs. Reads go to any broker; changes to the active controller,
  found through Metadata and followed across controller failover (NOT_CONTROLLER).
- :class:`Producer` — acks 0/1/all, per-partition batching into Kafka v2 record batches
  (batch.size, linger.ms), Kafka's default partitioner (murmur2 / sticky), retries with backoff
  bounded by delivery.timeout.ms; ``await send()`` returns a future of :class:`RecordMetadata`.
- :class:`Consumer` — assign partitions, seek (offset / beginning / end), long-poll fetches
  from the leaders, following leader changes; yields :class:`ConsumerRecord` with offsets.

Errors are :class:`KafkaError` (``error_code``: Kafka's number, ``name``: Kafka's name).

Example::

    async with AdminClient("127.0.0.1:9092") as admin:
        await admin.create_topic("t", 3, 3, configs={"min.insync.replicas": "2"})
    async with Producer("127.0.0.1:9092", acks="all") as producer:
        md = await (await producer.send("t", b"value", key=b"k"))
    async with Consumer("127.0.0.1:9092") as consumer:
        await consumer.assign([("t", md.partition)])
        consumer.seek(("t", md.partition), md.offset)
        records = await consumer.poll(5000)
"""

from client.admin_client import (
                                       AdminClient,
                                       ClusterDescription,
                                       CreatedTopic,
                                       NewPartitions,
                                       NewTopic,
                                       PartitionReassignment,
)
from client.consumer import Consumer, ConsumerRecord, OffsetOutOfRangeError
from client.errors import (
                                       KafkaError,
                                       KafkaTimeoutError,
                                       RecordTooLargeError,
                                       TransportError,
                                       UnknownTopicError,
                                       error_name,
)
from client.metadata import BrokerInfo, ClusterMetadata, PartitionInfo, TopicInfo
from client.partitioner import DefaultPartitioner, murmur2, partition_for_key, to_positive
from client.producer import Producer, RecordMetadata, TopicPartition, parse_acks

__all__ = [
    "AdminClient", "BrokerInfo", "ClusterDescription", "ClusterMetadata", "Consumer",
    "ConsumerRecord", "CreatedTopic", "DefaultPartitioner", "KafkaError", "KafkaTimeoutError",
    "NewPartitions", "NewTopic", "OffsetOutOfRangeError", "PartitionInfo", "PartitionReassignment",
    "Producer",
    "RecordMetadata", "RecordTooLargeError", "TopicInfo", "TopicPartition", "TransportError",
    "UnknownTopicError", "error_name", "murmur2", "parse_acks", "partition_for_key",
    "to_positive",
]
