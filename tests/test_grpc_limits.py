"""common/grpc_limits.py's element count: every repeated field at every depth, map values
included, and it stops once past the budget."""
from __future__ import annotations

import grpc

from common.grpc_limits import check, count_elements, limits_for
from common.rpc import replog_pb2 as pb


def test_elements_are_counted_at_every_depth_and_the_count_stops_at_the_budget():
    m = pb.MetadataRequest(topics=["a", "b", "c"])
    assert count_elements(m, 100) == 3
    assert count_elements(pb.MetadataRequest(topics=[""] * 50_000), 10) == 50_000  # len only
    f = pb.FetchRequest(topics=[pb.FetchTopic(topic="t", partitions=[pb.FetchPartition()] * 4)
                                for _ in range(5)])
    assert count_elements(f, 1000) == 5 + 5 * 4
    # past the budget after the first topics: the rest is never walked
    assert count_elements(f, 6) <= 5 + 4 * 2


def test_each_method_gets_its_bounds():
    assert limits_for("/replog.v1.Broker/Produce")[0] is None  # records: the listener's max
    assert limits_for("/replog.v1.Broker/Metadata") == (8 * 1024 * 1024, 10_000)
    assert limits_for("/replog.v1.Broker/Fetch")[1] == 100_000
    assert check("/replog.v1.Broker/Metadata", pb.MetadataRequest(topics=["a"])) is None
    code, why = check("/replog.v1.Broker/Metadata",
                      pb.MetadataRequest(topics=["x"] * 10_001))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "10000" in why
