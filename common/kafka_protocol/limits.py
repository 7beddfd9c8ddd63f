"""Bounds on what one Kafka request may make the broker decode (issue 42, defect 2).

A frame of ``socket.request.max.bytes`` (100 MiB) whose arrays hold empty elements, 2 bytes
each, asks the codec for tens of millions of dicts, one at a time. Kafka refuses such frames in
two places, and so does replog:
- its generated readers refuse a collection or string length that cannot fit in the bytes left
  ("Tried to allocate a collection of size N, but there are only M bytes remaining"), counting
  each element at the smallest size its type can have (``schema.min_size``);
- ``RequestContext.parseRequest`` fails the request as an InvalidRequestException, which closes
  the channel; here an element budget per API bounds how many array elements, summed over all
  arrays and nesting levels, one request may hold. The budget is far above what any client
  sends (a consumer's Metadata names its topics, a Fetch its partitions), and the APIs that
  carry partition or replica lists get ten times more.

A string longer than INT16 allows is refused in every version, as Kafka's generated readers do
("string field X had invalid length"), compact or not.
"""

from __future__ import annotations

MAX_STRING_BYTES = 0x7FFF
DEFAULT_ELEMENT_BUDGET = 10_000
PARTITION_LIST_ELEMENT_BUDGET = 100_000

# The APIs whose requests list partitions or replicas, possibly for a whole cluster.
_PARTITION_LIST_APIS = frozenset({
    0,   # Produce
    1,   # Fetch
    2,   # ListOffsets
    8,   # OffsetCommit
    9,   # OffsetFetch
    19,  # CreateTopics (replica assignments)
    20,  # DeleteTopics
    21,  # DeleteRecords
    23,  # OffsetForLeaderEpoch
    24,  # AddPartitionsToTxn
    28,  # TxnOffsetCommit
    34,  # AlterReplicaLogDirs
    35,  # DescribeLogDirs
    37,  # CreatePartitions (replica assignments)
    43,  # ElectLeaders
    45,  # AlterPartitionReassignments
    46,  # ListPartitionReassignments
    47,  # OffsetDelete
})


def element_budget(api_key: int) -> int:
    """How many array elements one request of ``api_key`` may hold in all."""
    return PARTITION_LIST_ELEMENT_BUDGET if api_key in _PARTITION_LIST_APIS \
        else DEFAULT_ELEMENT_BUDGET
