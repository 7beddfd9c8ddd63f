"""`replog log-dirs describe` (kafka-log-dirs): Kafka's JSON for the brokers' DescribeLogDirs
answers, an offline dir's error, the filters and user errors; and against a real cluster,
every replica found in the dir that holds its files."""

from __future__ import annotations

import asyncio
import json
import os

import pytest

from admin.log_dirs_cmd import STORAGE_ERROR, describe_json, parse_list
from client import AdminClient, Producer
from common.errors import ErrorCode, ReplogError
from common.rpc import replog_pb2 as pb
from tests.admin.test_cli import assert_one_line_error, replog
from tests.cluster.helpers import LoadProducer, assert_acked_read_back, eventually
from tests.polling import wait_until


def _response(*dirs) -> pb.DescribeLogDirsResponse:
    resp = pb.DescribeLogDirsResponse()
    for path, error, topics in dirs:
        r = resp.results.add(log_dir=path, error_code=int(error),
                             offline=error != ErrorCode.NONE)
        for topic, parts in topics.items():
            t = r.topics.add(topic=topic)
            for p, size, lag, future in parts:
                t.partitions.add(partition=p, size=size, offset_lag=lag, is_future=future)
    return resp


def test_kafkas_json_with_an_offline_dir_and_a_topic_filter():
    responses = {
        2: _response(("/b2/d0", ErrorCode.NONE, {"t": [(1, 10, 0, False)]})),
        1: _response(("/b1/d0", ErrorCode.NONE, {"u": [(0, 5, 0, False)],
                                                 "t": [(2, 7, 3, False), (0, 9, 0, False),
                                                       (0, 4, 5, True)]}),
                     ("/b1/d1", ErrorCode.KAFKA_STORAGE_ERROR, {})),
    }
    assert describe_json(responses) == {"version": 1, "brokers": [
        {"broker": 1, "logDirs": [
            {"logDir": "/b1/d0", "error": None, "partitions": [
                {"partition": "t-0", "size": 9, "offsetLag": 0, "isFuture": False},
                {"partition": "t-0", "size": 4, "offsetLag": 5, "isFuture": True},
                {"partition": "t-2", "size": 7, "offsetLag": 3, "isFuture": False},
                {"partition": "u-0", "size": 5, "offsetLag": 0, "isFuture": False}]},
            {"logDir": "/b1/d1", "error": STORAGE_ERROR, "partitions": []}]},
        {"broker": 2, "logDirs": [
            {"logDir": "/b2/d0", "error": None, "partitions": [
                {"partition": "t-1", "size": 10, "offsetLag": 0, "isFuture": False}]}]}]}
    only_u = describe_json(responses, ["u"])
    assert [p["partition"] for b in only_u["brokers"] for d in b["logDirs"]
            for p in d["partitions"]] == ["u-0"]
    assert len(only_u["brokers"][0]["logDirs"]) == 2  # dirs are listed even when empty


def test_lists():
    assert parse_list("1, 2,3", "broker-list", int) == [1, 2, 3]
    assert parse_list(None, "broker-list", int) is None
    with pytest.raises(ReplogError, match="--broker-list must be a comma-separated list"):
        parse_list("1,two", "broker-list", int)
    with pytest.raises(ReplogError, match="--topic-list is empty"):
        parse_list(" , ", "topic-list")


@pytest.mark.parametrize("args,contains", [
    (["--bootstrap-server", "127.0.0.1:1"], "Command must include exactly one action: "
                                            "--describe"),
    (["describe", "--bootstrap-server", "127.0.0.1:1", "--broker-list", "x"],
     "--broker-list must be a comma-separated list of broker ids"),
    (["describe", "--bootstrap-server", "127.0.0.1:1", "--timeout-ms", "300"],
     "no broker answered"),
])
async def test_user_errors_are_one_line(args, contains):
    rc, _, err = await replog("log-dirs", *args)
    assert_one_line_error(rc, err, contains)


@pytest.mark.integration
def test_describe_against_a_real_cluster(cluster_factory):
    cluster = cluster_factory(brokers=2, log_dirs_per_broker=2)
    b = cluster.bootstrap_servers

    async def setup():
        async with AdminClient(b) as admin:
            await admin.create_topic("t", 4, 2)
            await admin.create_topic("u", 1, 1)
        async with Producer(b, acks="all") as p:
            for i in range(40):
                await p.send_and_wait("t", b"x" * 100, partition=i % 4)
    asyncio.run(setup())

    rc, out, err = asyncio.run(replog("log-dirs", "describe", "--bootstrap-server", b))
    assert (rc, err) == (0, ""), err
    lines = out.splitlines()
    assert lines[:2] == ["Querying brokers for log directories information",
                         "Received log directory information from brokers 1,2"]
    doc = json.loads(lines[2])
    assert doc["version"] == 1 and [x["broker"] for x in doc["brokers"]] == [1, 2]
    seen = set()
    for broker in doc["brokers"]:
        node = cluster.broker(broker["broker"])
        assert [d["logDir"] for d in broker["logDirs"]] == [str(d) for d in node.log_dirs]
        for d in broker["logDirs"]:
            assert d["error"] is None
            for p in d["partitions"]:
                # The replica is where the broker says: its dir is in that log dir.
                assert os.path.isdir(os.path.join(d["logDir"], p["partition"]))
                assert not p["isFuture"]
                seen.add((broker["broker"], p["partition"]))
                if p["partition"].startswith("t-"):
                    assert p["size"] > 0
    assert {tp for _, tp in seen} == {"t-0", "t-1", "t-2", "t-3", "u-0"}
    assert len([1 for _, tp in seen if tp.startswith("t-")]) == 8  # RF 2

    rc, out, err = asyncio.run(replog("log-dirs", "--describe", "--bootstrap-server", b,
                                      "--broker-list", "2", "--topic-list", "u"))
    assert rc == 0, err
    doc = json.loads(out.splitlines()[2])
    assert [x["broker"] for x in doc["brokers"]] == [2]
    assert all(p["partition"] == "u-0" for d in doc["brokers"][0]["logDirs"]
               for p in d["partitions"])

    rc, _, err = asyncio.run(replog("log-dirs", "describe", "--bootstrap-server", b,
                                    "--broker-list", "1,7"))
    assert_one_line_error(rc, err, "The given brokers do not exist from --broker-list: 7. "
                                   "Current existent brokers: 1,2")


@pytest.mark.integration
def _where(bootstrap: str) -> dict[str, list[tuple[str, bool]]]:
    """`log-dirs describe` of topic t on the only broker: dir -> [(partition, isFuture)]."""
    rc, out, err = asyncio.run(replog("log-dirs", "describe", "--bootstrap-server", bootstrap,
                                      "--topic-list", "t"))
    assert rc == 0, err
    doc = json.loads(out.splitlines()[2])
    return {d["logDir"]: [(p["partition"], p["isFuture"]) for p in d["partitions"]]
            for d in doc["brokers"][0]["logDirs"]}


def test_an_intra_broker_move_under_load_through_the_admin_client(cluster_factory):
    # JBOD acceptance (design.md#jbod, KIP-113): AlterReplicaLogDirs through the admin client moves
    # a replica between a real broker's two log dirs under an acks=all load; the future replica
    # is swapped in, `log-dirs describe` shows it in the new dir, and no acked record is lost.
    cluster = cluster_factory(brokers=1, log_dirs_per_broker=2)
    b = cluster.bootstrap_servers
    dirs = [str(d) for d in cluster.broker(1).log_dirs]

    def where() -> dict[str, list[tuple[str, bool]]]:
        return _where(b)

    async def create():
        async with AdminClient(b) as admin:
            await admin.create_topic("t", 1, 1)
    asyncio.run(create())
    source = next(d for d, parts in where().items() if ("t-0", False) in parts)
    target = next(d for d in dirs if d != source)

    async def move_under_load():
        load = LoadProducer(b, "t", 1)
        task = asyncio.ensure_future(load.run())
        await eventually(lambda: len(load.acked) >= 200)
        async with AdminClient(b) as admin:
            assert await admin.alter_replica_log_dirs(1, {("t", 0): target}) == {("t", 0): None}
        await eventually(lambda: os.path.isdir(os.path.join(target, "t-0"))
                         and not os.path.isdir(os.path.join(source, "t-0")), timeout=60)
        acked = len(load.acked)
        await eventually(lambda: len(load.acked) >= acked + 100)  # still serving after it
        load.stop.set()
        await task
        await assert_acked_read_back(b, load)
    asyncio.run(move_under_load())
    assert where() == {source: [], target: [("t-0", False)]}
    assert not [e for d in dirs for e in os.listdir(d) if e.endswith(("-future", "-delete"))]


def test_reassign_verify_and_cancel_follow_a_log_dir_move(cluster_factory, tmp_path):
    # KIP-113 through `replog reassign` (Kafka's verifyReplicaMoves / cancelAssignment): a
    # file naming the replica's other log dir starts a move, held by a 1 kB/s
    # replica-alter-dir throttle; --verify reports it in progress and keeps the throttle,
    # --cancel drops the future replica (the replica stays where it was) and clears the
    # throttle, and --verify then says it is not being moved.
    cluster = cluster_factory(brokers=1, log_dirs_per_broker=2)
    b = cluster.bootstrap_servers

    async def fill():
        async with AdminClient(b) as admin:
            await admin.create_topic("t", 1, 1)
        async with Producer(b, acks="all", linger_ms=5) as p:  # > the 1000-offset swap lag
            for f in [await p.send("t", b"x" * 1000, partition=0) for _ in range(3000)]:
                await f
    asyncio.run(fill())

    def where() -> dict[str, list[tuple[str, bool]]]:
        return _where(b)
    source = next(d for d, parts in where().items() if ("t-0", False) in parts)
    target = next(str(d) for d in cluster.broker(1).log_dirs if str(d) != source)
    f = tmp_path / "plan.json"
    f.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [1], "log_dirs": [target]}]}))
    args = ["reassign", "--bootstrap-server", b, "--reassignment-json-file", str(f)]

    # The throttle first, applied before the move starts: a broker applies a config change
    # when ZooKeeper's notification reaches it, a moment after the tool wrote it (as in Kafka),
    # and until then the copier runs free.
    rc, _, err = asyncio.run(replog("configs", "--bootstrap-server", b, "--entity-type",
                                    "brokers", "--entity-name", "1", "--alter", "--add-config",
                                    "replica.alter.log.dirs.io.max.bytes.per.second=1000"))
    assert (rc, err) == (0, "")

    def applied() -> bool:
        with open(cluster.broker(1).event_log_file, encoding="utf-8") as f:
            return any(e.get("event") == "broker_config_applied" and e["config"].get(
                "replica.alter.log.dirs.io.max.bytes.per.second") == "1000"
                for e in map(json.loads, f))
    wait_until(applied, what="the throttle applied by broker 1")
    rc, out, err = asyncio.run(replog(*args, "--execute"))
    assert (rc, err) == (0, ""), out
    assert out.splitlines()[-1] == "Successfully started log directory move for: t-0-1"
    wait_until(lambda: ("t-0", True) in where()[target], what="the future replica")
    rc, out, err = asyncio.run(replog(*args, "--verify"))
    assert (rc, err) == (0, "")
    assert out.splitlines()[-2:] == ["Status of replica reassignment:",
                                     "Reassignment of replica t-0-1 is still in progress."]
    assert "Clearing" not in out  # a move is under way: the throttle stays

    rc, out, err = asyncio.run(replog(*args, "--cancel"))
    assert (rc, err) == (0, "")
    assert out.splitlines()[:2] == ["None of the specified partition reassignments are active.",
                                    "Successfully cancelled log directory move for: t-0-1"]
    assert "Clearing broker-level throttles on broker 1" in out
    wait_until(lambda: where() == {source: [("t-0", False)], target: []},
               what="the future replica dropped, the replica where it was")
    rc, out, err = asyncio.run(replog(*args, "--verify"))
    assert (rc, err) == (0, "")
    lines = out.splitlines()
    assert lines[lines.index("Status of replica reassignment:") + 1] == (
        f"Partition t-0 on broker 1 is not being moved from log dir {source} to {target}.")
    assert lines[-2:] == ["Clearing broker-level throttles on broker 1",
                          "Clearing topic-level throttles on topic t"]  # nothing moving now
