"""The hand-transcribed codec that the generated one replaced (issue 41 item 1), frozen as it
was at commit 4d3fcc6 for ``python -m bench kafka_codec``: its Produce and Fetch messages
(common/kafka_protocol/messages.py then) over its interpretive schema.py and primitives.py.
Nothing but the benchmark imports it."""

from __future__ import annotations

from bench.kafka_codec_baseline.schema import Message, array, f, struct, versions

# ------------------------------------------------------------------------------ Produce

PRODUCE_REQUEST = struct(
    f("transactional_id", "string", "3+", nullable="3+", default=None),
    f("acks", "int16"),
    f("timeout_ms", "int32"),
    f("topic_data", array(struct(
        f("name", "string"),
        f("partition_data", array(struct(
            f("index", "int32"),
            f("records", "records", nullable="0+"))))))),
)
_LEADER_ID_AND_EPOCH = struct(f("leader_id", "int32", default=-1),
                              f("leader_epoch", "int32", default=-1))
_NODE_ENDPOINT = struct(f("node_id", "int32"), f("host", "string"), f("port", "int32"),
                        f("rack", "string", nullable="0+", default=None))
PRODUCE_RESPONSE = struct(
    f("responses", array(struct(
        f("name", "string"),
        f("partition_responses", array(struct(
            f("index", "int32"),
            f("error_code", "int16"),
            f("base_offset", "int64"),
            f("log_append_time_ms", "int64", "2+", default=-1),
            f("log_start_offset", "int64", "5+", default=-1),
            f("record_errors", array(struct(
                f("batch_index", "int32", "8+"),
                f("batch_index_error_message", "string", "8+", nullable="8+",
                  default=None))), "8+"),
            f("error_message", "string", "8+", nullable="8+", default=None),
            f("current_leader", _LEADER_ID_AND_EPOCH, "10+", tag=0))))))),
    f("throttle_time_ms", "int32", "1+"),
    f("node_endpoints", array(_NODE_ENDPOINT), "10+", tag=0),
)

# ------------------------------------------------------------------------------ Fetch

FETCH_REQUEST = struct(
    f("cluster_id", "string", "12+", nullable="12+", tag=0, default=None),
    f("replica_id", "int32", "0-14", default=-1),
    f("replica_state", struct(f("replica_id", "int32", "15+", default=-1),
                              f("replica_epoch", "int64", "15+", default=-1)), "15+", tag=1),
    f("max_wait_ms", "int32"),
    f("min_bytes", "int32"),
    f("max_bytes", "int32", "3+", default=0x7FFFFFFF),
    f("isolation_level", "int8", "4+"),
    f("session_id", "int32", "7+"),
    f("session_epoch", "int32", "7+", default=-1),
    f("topics", array(struct(
        f("topic", "string", "0-12"),
        f("topic_id", "uuid", "13+"),
        f("partitions", array(struct(
            f("partition", "int32"),
            f("current_leader_epoch", "int32", "9+", default=-1),
            f("fetch_offset", "int64"),
            f("last_fetched_epoch", "int32", "12+", default=-1),
            f("log_start_offset", "int64", "5+", default=-1),
            f("partition_max_bytes", "int32"),
            f("replica_directory_id", "uuid", "17+", tag=0))))))),
    f("forgotten_topics_data", array(struct(
        f("topic", "string", "7-12"),
        f("topic_id", "uuid", "13+"),
        f("partitions", array("int32"), "7+"))), "7+"),
    f("rack_id", "string", "11+"),
)
FETCH_RESPONSE = struct(
    f("throttle_time_ms", "int32", "1+"),
    f("error_code", "int16", "7+"),
    f("session_id", "int32", "7+"),
    f("responses", array(struct(
        f("topic", "string", "0-12"),
        f("topic_id", "uuid", "13+"),
        f("partitions", array(struct(
            f("partition_index", "int32"),
            f("error_code", "int16"),
            f("high_watermark", "int64"),
            f("last_stable_offset", "int64", "4+", default=-1),
            f("log_start_offset", "int64", "5+", default=-1),
            f("diverging_epoch", struct(f("epoch", "int32", "12+", default=-1),
                                        f("end_offset", "int64", "12+", default=-1)),
              "12+", tag=0),
            f("current_leader", _LEADER_ID_AND_EPOCH, "12+", tag=1),
            f("snapshot_id", struct(f("end_offset", "int64", default=-1),
                                    f("epoch", "int32", default=-1)), "12+", tag=2),
            f("aborted_transactions", array(struct(
                f("producer_id", "int64", "4+"), f("first_offset", "int64", "4+"))),
              "4+", nullable="4+"),
            f("preferred_read_replica", "int32", "11+", default=-1),
            f("records", "records", nullable="0+"))))))),
    f("node_endpoints", array(_NODE_ENDPOINT), "16+", tag=0),
)


PRODUCE_REQUEST_MESSAGE = Message("ProduceRequest", 0, versions("3-9"), versions("9+"),
                                  PRODUCE_REQUEST)
PRODUCE_RESPONSE_MESSAGE = Message("ProduceResponse", 0, versions("3-9"), versions("9+"),
                                   PRODUCE_RESPONSE)
FETCH_REQUEST_MESSAGE = Message("FetchRequest", 1, versions("4-12"), versions("12+"),
                                FETCH_REQUEST)
FETCH_RESPONSE_MESSAGE = Message("FetchResponse", 1, versions("4-12"), versions("12+"),
                                 FETCH_RESPONSE)
