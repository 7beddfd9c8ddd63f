"""`replog reassign` (kafka-reassign-partitions): Kafka's JSON, option checks and messages.

Three layers:
- pure functions (JSON parsing and validation, generate's layout, Kafka's throttle maths and
  message formats), no servers;
- the CLI in a subprocess against in-process fake brokers and a fake controller that keeps
  the reassignment contract (a request with any invalid partition is refused whole; cancel
  reverts), so execute/verify/cancel/list and the throttle configs run end to end in seconds;
- against a real cluster (integration; they need the controller's AlterPartitionReassignments
  and ListPartitionReassignments).
"""

from __future__ import annotations

import asyncio
import json
import random
import re
from pathlib import Path

import grpc
import pytest

from admin.reassign.messages import (
    CANNOT_EXECUTE_BECAUSE_OF_EXISTING,
    cancelled_message,
    cancelled_moves_message,
    generate_output,
    list_lines,
    log_dir_move_lines,
    log_dir_moves_message,
    progress_line,
    reassignment_json,
    result_error_lines,
    rollback_output,
    started_message,
    verify_lines,
)
from admin.reassign.parsing import parse_log_dirs, parse_reassignment, parse_topics_to_move
from admin.reassign.planning import (
    PartitionMove,
    ReassignmentState,
    log_dir_move,
    propose_assignment,
    proposed_moves,
    reassigning_brokers,
)
from admin.reassign.throttles import merge_throttled, throttled_replicas
from client import AdminClient, Producer
from client.admin_client import PartitionReassignment
from client.errors import KafkaError
from common.assignment import BrokerMetadata
from common.errors import ErrorCode, ReplogError
from common.rpc import replog_pb2 as pb
from tests.admin.fake_cluster import FakeBroker, FakeCluster, FakeController, _abort
from tests.admin.test_cli import assert_one_line_error, replog
from tests.polling import wait_until

B = ["--bootstrap-server", "127.0.0.1:1"]


def plan(*parts, version=1) -> str:
    return json.dumps({"version": version, "partitions": [
        {"topic": t, "partition": p, "replicas": r} for t, p, r in parts]})


# ---------------------------------------------------------------------------- JSON (pure)

def test_reassignment_json_round_trips_in_kafkas_compact_form():
    text = reassignment_json({("foo", 1): [2, 3], ("bar", 0): [1]})
    assert text == ('{"version":1,"partitions":['
                    '{"topic":"bar","partition":0,"replicas":[1],"log_dirs":["any"]},'
                    '{"topic":"foo","partition":1,"replicas":[2,3],"log_dirs":["any","any"]}]}')
    assert parse_reassignment(text) == {("bar", 0): [1], ("foo", 1): [2, 3]}
    # log_dirs is optional, and "version" defaults to 1 as in Kafka.
    assert parse_reassignment('{"partitions":[{"topic":"a","partition":0,"replicas":[3]}]}') \
        == {("a", 0): [3]}


@pytest.mark.parametrize("text,message", [
    ("{not json", "The reassignment JSON file is not valid JSON"),
    ("[1, 2]", "must be a JSON object"),
    (plan(("a", 0, [1]), version=2), "Not supported version field value 2"),
    ('{"version":1}', "Missing key partitions in the reassignment JSON file"),
    ('{"version":1,"partitions":[{"topic":"a","replicas":[1]}]}',
     "Missing key partition in entry 0 of partitions"),
    ('{"version":1,"partitions":[{"topic":"a","partition":0}]}',
     "Missing key replicas in entry 0 of partitions"),
    ('{"version":1,"partitions":[{"topic":"a","partition":"0","replicas":[1]}]}',
     "partition of entry 0 of partitions must be a non-negative integer"),
    (plan(("a", 0, [1, "2"])), "replicas of partition a-0 must be a list of integer broker ids"),
    (plan(("a", 0, [1, 2.5])), "must be a list of integer broker ids"),
    (plan(("a", 0, [1, True])), "must be a list of integer broker ids"),
    (plan(), "Partition reassignment list cannot be empty"),
    (plan(("a", 0, [])), "Partition replica list cannot be empty"),
    (plan(("a", 0, [1]), ("b", 1, [2]), ("a", 0, [2])),
     "Partition reassignment contains duplicate topic partitions: a-0"),
    (plan(("a", 0, [1, 2, 1]), ("a", 1, [3, 3])),
     "Partition replica lists may contain only unique entries: a-0 contains multiple entries "
     "for 1. a-1 contains multiple entries for 3"),
    ('{"partitions":[{"topic":"a","partition":0,"replicas":[1,2],"log_dirs":["any"]}]}',
     "Size of replicas list [1, 2] is different from size of log dirs list ['any']"),
])
def test_bad_reassignment_files_are_refused_with_one_message(text, message):
    with pytest.raises(ReplogError) as e:
        parse_reassignment(text)
    assert message in str(e.value)
    assert "\n" not in str(e.value)


def test_named_log_dirs_are_intra_broker_moves():
    text = ('{"partitions":[{"topic":"a","partition":0,"replicas":[1,2],'
            '"log_dirs":["any","/d1"]},{"topic":"b","partition":3,"replicas":[2]}]}')
    assert parse_reassignment(text) == {("a", 0): [1, 2], ("b", 3): [2]}
    assert parse_log_dirs(text) == {(("a", 0), 2): "/d1"}
    assert log_dir_moves_message([(("a", 0), 2), (("a", 0), 1)]) == \
        "Successfully started log directory moves for: a-0-1,a-0-2"


def test_topics_to_move_file():
    assert parse_topics_to_move('{"version":1,"topics":[{"topic":"foo"},{"topic":"bar"}]}') \
        == ["foo", "bar"]
    for text, message in [
            ('{"topics":[{"topic":"a"},{"topic":"a"}]}',
             "List of topics to reassign contains duplicate entries: a"),
            ('{"topics":[]}', "List of topics to reassign is empty"),
            ('{"topics":[{"name":"a"}]}', 'must be an object with a string "topic"'),
            ('{"version":1}', "Missing key topics"),
            ("nope", "not valid JSON")]:
        with pytest.raises(ReplogError, match=re.escape(message)):
            parse_topics_to_move(text)


# ---------------------------------------------------------------------------- generate (pure)

def test_generate_lays_out_each_topic_as_kafkas_assignment_does():
    current = {("foo", 0): [1, 2], ("foo", 1): [2, 3], ("foo", 2): [3, 1], ("bar", 0): [1]}
    brokers = [BrokerMetadata(b) for b in (4, 5, 6)]
    proposed = propose_assignment(current, brokers, random.Random(7))
    assert set(proposed) == set(current)
    assert all(len(proposed[tp]) == len(current[tp]) for tp in current)  # RF kept
    assert all(set(r) <= {4, 5, 6} and len(set(r)) == len(r) for r in proposed.values())
    # Kafka's round-robin: the three partitions of foo lead on three different brokers.
    assert sorted(proposed[("foo", p)][0] for p in range(3)) == [4, 5, 6]
    out = generate_output(current, proposed)
    head, cur, blank, head2, prop, end = out.split("\n")
    assert (head, blank, head2, end) == ("Current partition replica assignment", "",
                                         "Proposed partition reassignment configuration", "")
    assert parse_reassignment(cur) == dict(sorted(current.items()))
    assert parse_reassignment(prop) == proposed


def test_generate_refuses_a_replication_factor_above_the_broker_list():
    with pytest.raises(ReplogError, match="Replication factor: 3 larger than available "
                                          "brokers: 2."):
        propose_assignment({("foo", 0): [1, 2, 3]}, [BrokerMetadata(1), BrokerMetadata(2)])
    with pytest.raises(ReplogError, match="--disable-rack-aware"):
        propose_assignment({("foo", 0): [1]}, [BrokerMetadata(1, "r1"), BrokerMetadata(2)])


# ---------------------------------------------------------------------------- execute (pure)

def test_rollback_block_and_started_message_are_kafkas():
    assert rollback_output({("foo", 0): [1, 2]}) == (
        "Current partition replica assignment\n\n"
        '{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1,2],'
        '"log_dirs":["any","any"]}]}\n\n'
        "Save this to use as the --reassignment-json-file option during rollback\n")
    assert started_message([("foo", 0)]) == \
        "Successfully started partition reassignment for foo-0"
    assert started_message([("foo", 1), ("foo", 0)]) == \
        "Successfully started partition reassignments for foo-0,foo-1"


def test_throttled_replicas_follow_kafkas_move_map():
    current = {("foo", 0): [1, 2], ("foo", 1): [2, 3]}
    ongoing = {("bar", 0): PartitionReassignment((4, 1, 2), (4,), (1,))}
    moves = proposed_moves(ongoing, {("foo", 0): [1, 3], ("foo", 1): [2, 3]}, current)
    assert moves == {
        ("bar", 0): PartitionMove(frozenset({1, 2}), frozenset({4})),
        ("foo", 0): PartitionMove(frozenset({1, 2}), frozenset({3})),
        ("foo", 1): PartitionMove(frozenset({2, 3}), frozenset())}
    leader, follower = throttled_replicas(moves)
    assert leader == {"foo": {"0:1", "0:2", "1:2", "1:3"}, "bar": {"0:1", "0:2"}}
    assert follower == {"foo": {"0:3"}, "bar": {"0:4"}}
    assert reassigning_brokers(moves) == {1, 2, 3, 4}
    # A move re-submitted while running keeps the sources of the running one (Kafka).
    again = proposed_moves(ongoing, {("bar", 0): [4, 5]}, {("bar", 0): [4, 1, 2]})
    assert again[("bar", 0)] == PartitionMove(frozenset({1, 2}), frozenset({4, 5}))


def test_throttled_replicas_merge_with_what_the_topic_has():
    assert merge_throttled(None, {"1:2", "0:3", "10:1"}) == "0:3,1:2,10:1"
    assert merge_throttled("0:3,2:1", {"0:3", "1:1"}) == "0:3,1:1,2:1"
    assert merge_throttled("*", {"0:1"}) == "*"


# ---------------------------------------------------------------------------- verify / list / cancel

def test_verify_lines_are_kafkas():
    states = {("foo", 0): ReassignmentState((1, 2), (1, 2), True),
              ("foo", 1): ReassignmentState((3, 1, 2), (3, 1), False),
              ("foo", 2): ReassignmentState((1, 2), (1, 3), True)}
    assert verify_lines(states, {("foo", 1): ["  Replica 3: ..."]}) == [
        "Status of partition reassignment:",
        "Reassignment of partition foo-0 is completed.",
        "Reassignment of partition foo-1 is still in progress.",
        "  Replica 3: ...",
        "There is no active reassignment of partition foo-2, but replica set is 1,2 rather "
        "than 1,3."]


def test_log_dir_move_states_and_lines_are_kafkas():
    # Kafka's findLogDirMoveStates + replicaMoveStatesToString (ReassignPartitionsCommand
    # tests' cases): what --verify prints for the replicas a file names with a log dir.
    d0, d1, d2 = "/tmp/kafka-logs0", "/tmp/kafka-logs1", "/tmp/kafka-logs2"
    states = {
        (("bar", 0), 0): log_dir_move(d0, d0, None, False),
        (("foo", 0), 0): log_dir_move(d1, d0, d1, False),
        (("foo", 1), 0): log_dir_move(d1, d0, None, False),
        (("quux", 0), 0): log_dir_move(d1, None, None, False),
        (("quux", 1), 1): log_dir_move(d1, d0, d2, False),
        (("quux", 2), 1): log_dir_move(d1, None, None, True),
    }
    assert [s.kind for s in states.values()] == [
        "completed", "active", "cancelled", "missing", "active", "missing_dir"]
    assert [s.done for s in states.values()] == [True, False, True, True, False, True]
    assert log_dir_move_lines(states) == [
        "Status of replica reassignment:",
        "Reassignment of replica bar-0-0 completed successfully.",
        "Reassignment of replica foo-0-0 is still in progress.",
        f"Partition foo-1 on broker 0 is not being moved from log dir {d0} to {d1}.",
        "Partition quux-0 cannot be found in any live log directory on broker 0.",
        f"Partition quux-1 on broker 1 is being moved to log dir {d2} instead of {d1}.",
        "Partition quux-2 is not found in any live log dir on broker 1. "
        "There is likely an offline log directory on the broker."]
    assert cancelled_moves_message([(("foo", 0), 1)]) == \
        "Successfully cancelled log directory move for: foo-0-1"
    assert cancelled_moves_message([]) == "None of the specified partition moves are active."


def test_progress_line_shows_offsets_and_bytes_against_the_leader():
    assert progress_line(3, 1, 40, 100, 4000, 10000) == \
        "  Replica 3: log end offset 40 of 100, 4000 of 10000 bytes (40.0%) (leader 1)."
    assert progress_line(3, 1, None, 100, None, 10000) == \
        "  Replica 3: not created yet (leader 1)."
    assert progress_line(3, -1, None, None, None, None) == \
        "  Replica 3: no leader to copy from yet."
    assert progress_line(3, 1, 5, KafkaError(ErrorCode.KAFKA_STORAGE_ERROR), None, None) == \
        "  Replica 3: log end offset 5 (leader 1)."


def test_list_and_cancel_messages_are_kafkas():
    assert list_lines({}) == ["No partition reassignments found."]
    assert list_lines({("foo", 0): PartitionReassignment((2, 3, 1), (2, 3), (1,))}) == [
        "Current partition reassignments:", "foo-0: replicas: 2,3,1. adding: 2,3. removing: 1."]
    assert cancelled_message([("foo", 0)]) == \
        "Successfully cancelled partition reassignment for: foo-0"
    assert cancelled_message([("foo", 1), ("bar", 0)]) == \
        "Successfully cancelled partition reassignments for: bar-0,foo-1"
    assert cancelled_message([]) == "None of the specified partition reassignments are active."


def test_controller_errors_one_line_each_culprits_first():
    lines = result_error_lines({
        ("a", 0): KafkaError(ErrorCode.INVALID_REQUEST, "not started: b-1 is invalid"),
        ("b", 1): KafkaError(ErrorCode.BROKER_NOT_AVAILABLE, "broker 9 is not alive"),
        ("c", 0): None})
    assert lines == ["Error: b-1: BROKER_NOT_AVAILABLE: broker 9 is not alive",
                     "Error: a-0: INVALID_REQUEST: not started: b-1 is invalid"]


# ---------------------------------------------------------------------------- option checks

@pytest.mark.parametrize("args,contains", [
    ([], "Command must include exactly one action: --generate, --execute, --verify, "
         "--cancel, --list"),
    (["--list", "--verify"], "exactly one action"),
    (["list", "--verify"], "exactly one action"),
    (["--execute"], 'Missing required argument "[reassignment-json-file]"'),
    (["--generate", "--broker-list", "1"], 'Missing required argument '
                                           '"[topics-to-move-json-file]"'),
    (["--verify", "--reassignment-json-file", "f", "--throttle", "5"],
     'Option "[throttle]" can\'t be used with action "[verify]"'),
    (["--execute", "--reassignment-json-file", "f", "--preserve-throttles"],
     'Option "[preserve-throttles]" can\'t be used with action "[execute]"'),
    (["--list", "--additional"], 'Option "[additional]" can\'t be used with action "[list]"'),
    (["--execute", "--reassignment-json-file", "f", "--throttle", "0"],
     "--throttle must be a positive number of bytes per second"),
    (["--execute", "--reassignment-json-file", "f", "--throttle", "x"],
     "argument --throttle: invalid int value"),
    (["--execute", "--reassignment-json-file", "/no/such/file.json"], "No such file"),
    (["--list", "--timeout-ms", "300"], "no broker answered"),
])
async def test_user_errors_are_one_line(args, contains):
    rc, _, err = await replog("reassign", *B, *args)
    assert_one_line_error(rc, err, contains)


# ---------------------------------------------------------------------------- against fakes

class ReassigningController(FakeController):
    """The contract of the real controller's AlterPartitionReassignments (KIP-455,
    design.md#reassignment): a request with any invalid partition is refused whole, the valid ones
    answering INVALID_REQUEST "not started"; cancel reverts to the original replicas."""

    def _problem(self, topic: str, rp) -> tuple[int, str] | None:
        s = self.state
        t = s.topics.get(topic)
        if t is None or rp.partition >= len(t.partitions):
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{rp.partition} is unknown"
        p = t.partitions[rp.partition]
        if (topic, rp.partition) in s.refuse:
            return s.refuse[(topic, rp.partition)]
        if rp.cancel:
            return None if p.adding or p.removing else (
                ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "no reassignment in progress")
        if not rp.replicas or len(set(rp.replicas)) != len(rp.replicas) \
                or list(rp.replicas) == self._original(topic, rp.partition):
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"invalid replicas {list(rp.replicas)}"
        dead = [b for b in rp.replicas if b not in s.brokers]
        if dead:
            return ErrorCode.BROKER_NOT_AVAILABLE, f"broker(s) {dead} not alive"
        return None

    def _original(self, topic: str, partition: int) -> list[int]:
        p = self.state.topics[topic].partitions[partition]
        return self.state.originals.get((topic, partition), p.replicas)

    async def AlterPartitionReassignments(self, request, context):
        await self._check_active(context)
        self.state.alter_requests.append(request)
        items = [(rt.topic, rp) for rt in request.topics for rp in rt.partitions]
        problems = {(t, rp.partition): self._problem(t, rp) for t, rp in items}
        bad = [f"{t}-{p}" for (t, p), e in problems.items() if e]
        resp = pb.AlterPartitionReassignmentsResponse()
        for (t, p), e in problems.items():
            code, msg = e if e else ((ErrorCode.INVALID_REQUEST, f"not started: {bad}")
                                     if bad else (ErrorCode.NONE, ""))
            resp.responses.add(topic=t, partition=p, error_code=code, error_message=msg)
        if bad:
            return resp
        for t, rp in items:
            p = self.state.topics[t].partitions[rp.partition]
            original = self._original(t, rp.partition)
            if rp.cancel:
                p.replicas, p.adding, p.removing = original, [], []
                del self.state.originals[(t, rp.partition)]
                continue
            self.state.originals[(t, rp.partition)] = original
            target = list(rp.replicas)
            p.replicas = target + [b for b in original if b not in target]
            p.adding = [b for b in target if b not in original]
            p.removing = [b for b in original if b not in target]
        return resp

    async def ListPartitionReassignments(self, request, context):
        await self._check_active(context)
        wanted = {(t.topic, p) for t in request.topics for p in t.partitions}
        resp = pb.ListPartitionReassignmentsResponse()
        for name, t in sorted(self.state.topics.items()):
            ongoing = [(i, p) for i, p in enumerate(t.partitions) if (p.adding or p.removing)
                       and (not wanted or (name, i) in wanted)]
            if ongoing:
                resp.topics.add(topic=name, partitions=[pb.OngoingPartitionReassignment(
                    partition=i, replicas=p.replicas, adding_replicas=p.adding,
                    removing_replicas=p.removing) for i, p in ongoing])
        return resp


class ConfigBroker(FakeBroker):
    """Topic and broker dynamic configs (IncrementalAlterConfigs / DescribeConfigs), and the
    replica log end offsets and sizes --verify reports (state.replica_logs)."""

    def _configs(self, r) -> dict[str, str] | None:
        if r.resource_type == pb.BROKER:
            return self.state.broker_configs.setdefault(r.resource_name, {})
        t = self.state.topics.get(r.resource_name)
        return None if t is None else t.configs

    async def DescribeConfigs(self, request, context):
        resp = pb.DescribeConfigsResponse()
        for r in request.resources:
            out = resp.results.add(resource_type=r.resource_type, resource_name=r.resource_name)
            configs = self._configs(r)
            if configs is None:
                out.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            source = pb.DYNAMIC_TOPIC_CONFIG if r.resource_type == pb.TOPIC \
                else pb.DYNAMIC_BROKER_CONFIG
            for k, v in sorted(configs.items()):
                out.configs.add(name=k, value=v, config_source=source)
        return resp

    async def IncrementalAlterConfigs(self, request, context):
        resp = pb.IncrementalAlterConfigsResponse()
        for r in request.resources:
            out = resp.responses.add(resource_type=r.resource_type,
                                     resource_name=r.resource_name)
            configs = self._configs(r)
            if configs is None:
                out.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            for c in r.configs:
                if c.config_operation == pb.DELETE:
                    configs.pop(c.name, None)
                else:
                    configs[c.name] = c.value
        return resp

    async def GetReplicaLogInfo(self, request, context):
        if request.broker_id != self.id:
            await _abort(context, grpc.StatusCode.INVALID_ARGUMENT, ErrorCode.INVALID_REQUEST,
                         "wrong broker")
        resp = pb.GetReplicaLogInfoResponse(broker_epoch=1)
        for t in request.topic_partitions:
            out = resp.topic_partition_log_info.add(topic=t.topic)
            for p in t.partitions:
                got = self.state.replica_logs.get((self.id, t.topic, p))
                out.partition_log_info.add(
                    partition=p, log_end_offset=got[0] if got else -1,
                    error_code=ErrorCode.NONE if got else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return resp

    async def AlterReplicaLogDirs(self, request, context):
        """KIP-113 as a broker answers it: a replica not created yet is remembered and
        answered REPLICA_NOT_AVAILABLE; once it exists (state.replica_logs), NONE."""
        resp = pb.AlterReplicaLogDirsResponse()
        for d in request.dirs:
            for t in d.topics:
                for p in t.partitions:
                    self.state.log_dir_requests.append((self.id, t.topic, p, d.path))
                    exists = (self.id, t.topic, p) in self.state.replica_logs
                    resp.results.add(topic=t.topic, partition=p, error_code=ErrorCode.NONE
                                     if exists else ErrorCode.REPLICA_NOT_AVAILABLE)
                    self.state.replica_logs.setdefault((self.id, t.topic, p), (0, 0))
        return resp

    async def DescribeLogDirs(self, request, context):
        d = pb.DescribeLogDirsResult(log_dir=f"/fake/{self.id}")
        for t in request.topics:
            parts = [pb.DescribeLogDirsPartition(partition=p, size=got[1])
                     for p in t.partitions
                     if (got := self.state.replica_logs.get((self.id, t.topic, p)))]
            if parts:
                d.topics.add(topic=t.topic, partitions=parts)
        return pb.DescribeLogDirsResponse(results=[d])


class ReassignFake(FakeCluster):
    async def __aenter__(self) -> ReassignFake:
        s = self.state
        s.broker_configs, s.replica_logs, s.alter_requests, s.originals = {}, {}, [], {}
        s.log_dir_requests = []
        s.refuse = {}  # (topic, partition) -> (code, message) the controller answers
        for b in range(1, self.num_brokers + 1):
            s.brokers[b] = await self._serve("broker", b, ConfigBroker(s, b))
        s.controllers[100] = await self._serve("controller", 100, ReassigningController(s, 100))
        s.active_controller = 100
        return self

    def complete(self, topic: str, partition: int) -> None:
        p = self.state.topics[topic].partitions[partition]
        p.replicas = [b for b in p.replicas if b not in p.removing]
        p.adding, p.removing = [], []
        del self.state.originals[(topic, partition)]


@pytest.fixture
async def fake():
    async with ReassignFake(brokers=4) as fc:
        fc.state.add_topic("foo", 3, 2, assignment={0: [1, 2], 1: [2, 3], 2: [3, 1]})
        yield fc


def _file(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _replicas(fake: ReassignFake, topic: str) -> list[list[int]]:
    return [list(p.replicas) for p in fake.state.topics[topic].partitions]


async def test_execute_verify_list_and_throttles_against_the_contract(fake, tmp_path):
    b = ["--bootstrap-server", fake.bootstrap]
    # foo-1 only swaps its preferred leader: no data moves, but the controller still runs it.
    f = _file(tmp_path, "plan.json", plan(("foo", 0, [1, 4]), ("foo", 1, [3, 2])))
    rc, out, err = await replog("reassign", *b, "--execute", "--reassignment-json-file", f,
                                "--throttle", "1048576")
    assert (rc, err) == (0, "")
    assert out == (
        "Current partition replica assignment\n\n"
        '{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1,2],'
        '"log_dirs":["any","any"]},{"topic":"foo","partition":1,"replicas":[2,3],'
        '"log_dirs":["any","any"]}]}\n\n'
        "Save this to use as the --reassignment-json-file option during rollback\n"
        "Warning: You must run --verify periodically, until the reassignment completes, to "
        "ensure the throttle is removed.\n"
        "The inter-broker throttle limit was set to 1048576 B/s\n"
        "Successfully started partition reassignments for foo-0,foo-1\n")
    s = fake.state
    assert not s.alter_requests[0].HasField("throttle_bytes_per_sec")  # set via configs only
    # Kafka's throttles: sources lead, the adding replica follows; every broker of a move.
    assert s.topics["foo"].configs == {"leader.replication.throttled.replicas": "0:1,0:2,1:2,1:3",
                                       "follower.replication.throttled.replicas": "0:4"}
    rate = {"leader.replication.throttled.rate": "1048576",
            "follower.replication.throttled.rate": "1048576"}
    assert {k: v for k, v in s.broker_configs.items() if v} == \
        {"1": rate, "2": rate, "3": rate, "4": rate}
    assert _replicas(fake, "foo")[0] == [1, 4, 2]

    rc, out, _ = await replog("reassign", "list", *b)
    assert (rc, out) == (0, "Current partition reassignments:\n"
                            "foo-0: replicas: 1,4,2. adding: 4. removing: 2.\n")

    # Without --additional, Kafka refuses to execute while a move runs, before any change.
    f2 = _file(tmp_path, "more.json", plan(("foo", 2, [3, 4])))
    rc, _, err = await replog("reassign", *b, "--execute", "--reassignment-json-file", f2)
    assert_one_line_error(rc, err, CANNOT_EXECUTE_BECAUSE_OF_EXISTING)
    assert _replicas(fake, "foo")[2] == [3, 1]

    s.replica_logs.update({(1, "foo", 0): (100, 10000), (4, "foo", 0): (40, 4000)})
    fake.state.topics["foo"].partitions[1].replicas = [2, 4]  # someone else changed it
    rc, out, _ = await replog("reassign", *b, "--verify", "--reassignment-json-file", f)
    assert (rc, out) == (0, "Status of partition reassignment:\n"
                            "Reassignment of partition foo-0 is still in progress.\n"
                            "  Replica 4: log end offset 40 of 100, 4000 of 10000 bytes "
                            "(40.0%) (leader 1).\n"
                            "There is no active reassignment of partition foo-1, but replica "
                            "set is 2,4 rather than 3,2.\n")
    assert s.topics["foo"].configs  # throttles stay while a move runs

    fake.complete("foo", 0)
    rc, out, _ = await replog("reassign", *b, "--verify", "--reassignment-json-file", f,
                              "--preserve-throttles")
    assert "Reassignment of partition foo-0 is completed." in out and "Clearing" not in out
    assert s.topics["foo"].configs
    rc, out, _ = await replog("reassign", *b, "--verify", "--reassignment-json-file", f)
    assert out.endswith("Clearing broker-level throttles on brokers 1,2,3,4\n"
                        "Clearing topic-level throttles on topic foo\n"), out
    assert s.topics["foo"].configs == {} and not any(s.broker_configs.values())
    rc, out, _ = await replog("reassign", *b, "--list")
    assert out == "No partition reassignments found.\n"


async def test_execute_sends_alter_replica_log_dirs_for_named_dirs(fake, tmp_path):
    # Kafka's executeMoves: after the reassignment starts, each replica with a named dir is
    # moved there; the one not created yet on broker 4 is asked again until it exists.
    fake.state.replica_logs[(1, "foo", 0)] = (10, 100)
    f = _file(tmp_path, "plan.json", json.dumps({"version": 1, "partitions": [
        {"topic": "foo", "partition": 0, "replicas": [1, 4], "log_dirs": ["/d1", "/e4"]}]}))
    rc, out, err = await replog("reassign", "--bootstrap-server", fake.bootstrap, "--execute",
                                "--reassignment-json-file", f)
    assert (rc, err) == (0, "")
    assert out.splitlines()[-2:] == [
        "Successfully started log directory move for: foo-0-1",
        "Successfully started log directory move for: foo-0-4"]
    assert fake.state.log_dir_requests == [(1, "foo", 0, "/d1"), (4, "foo", 0, "/e4"),
                                           (4, "foo", 0, "/e4")]


async def test_generated_plan_with_unchanged_partitions_executes(fake, tmp_path):
    # `--generate` lists every partition of the topics, moved or not; `--execute` of that plan
    # must not fail on the ones that stay (the controller refuses the same replicas; Kafka's
    # completes them as no-ops): only the moved ones are sent.
    now = _replicas(fake, "foo")
    moved = [b for b in (1, 2, 3, 4) if b not in now[1]][:1] + now[1][1:]
    f = _file(tmp_path, "plan.json", json.dumps({"version": 1, "partitions": [
        {"topic": "foo", "partition": 0, "replicas": now[0]},
        {"topic": "foo", "partition": 1, "replicas": moved}]}))
    rc, out, err = await replog("reassign", "--bootstrap-server", fake.bootstrap, "--execute",
                                "--reassignment-json-file", f)
    assert (rc, err) == (0, "")
    assert out.splitlines()[-1] == "Successfully started partition reassignments for foo-0,foo-1"
    (req,) = fake.state.alter_requests
    assert [(t.topic, [p.partition for p in t.partitions]) for t in req.topics] == [("foo", [1])]
    assert _replicas(fake, "foo")[0] == now[0]


async def test_same_replicas_with_named_dirs_only_move_log_dirs(fake, tmp_path):
    # The replicas stay: nothing for the controller to reassign (it refuses the same
    # replicas), only the intra-broker move (KIP-113).
    now = _replicas(fake, "foo")[0]
    fake.state.replica_logs[(now[0], "foo", 0)] = (10, 100)
    f = _file(tmp_path, "plan.json", json.dumps({"version": 1, "partitions": [
        {"topic": "foo", "partition": 0, "replicas": now,
         "log_dirs": ["/d1"] + ["any"] * (len(now) - 1)}]}))
    rc, out, err = await replog("reassign", "--bootstrap-server", fake.bootstrap, "--execute",
                                "--reassignment-json-file", f)
    assert (rc, err) == (0, "")
    assert "Successfully started partition reassignment" not in out
    assert out.splitlines()[-1] == f"Successfully started log directory move for: foo-0-{now[0]}"
    assert fake.state.log_dir_requests == [(now[0], "foo", 0, "/d1")]
    assert _replicas(fake, "foo")[0] == now


async def test_cancel_reverts_and_clears_throttles(fake, tmp_path):
    b = ["--bootstrap-server", fake.bootstrap]
    f = _file(tmp_path, "plan.json", plan(("foo", 2, [4, 1])))
    rc, out, _ = await replog("reassign", *b, "--execute", "--reassignment-json-file", f,
                              "--throttle", "500", "--replica-alter-log-dirs-throttle", "700")
    assert rc == 0 and out.endswith("The inter-broker throttle limit was set to 500 B/s\n"
                                    "The replica-alter-dir throttle limit was set to 700 B/s\n"
                                    "Successfully started partition reassignment for foo-2\n")
    assert fake.state.broker_configs["4"] == {
        "leader.replication.throttled.rate": "500", "follower.replication.throttled.rate": "500",
        "replica.alter.log.dirs.io.max.bytes.per.second": "700"}
    rc, out, err = await replog("reassign", "cancel", *b, "--reassignment-json-file", f)
    assert (rc, err) == (0, "")
    assert out == ("Successfully cancelled partition reassignment for: foo-2\n"
                   "Clearing broker-level throttles on brokers 1,2,3,4\n"
                   "Clearing topic-level throttles on topic foo\n")
    assert _replicas(fake, "foo")[2] == [3, 1]
    assert fake.state.topics["foo"].configs == {}
    assert not any(fake.state.broker_configs.values())
    rc, out, _ = await replog("reassign", "cancel", *b, "--reassignment-json-file", f,
                              "--preserve-throttles")
    assert (rc, out) == (0, "None of the specified partition reassignments are active.\n")


@pytest.mark.parametrize("parts,contains", [
    ([("nope", 0, [1, 2])], "Topic 'nope' does not exist"),
    ([("foo", 0, [1, 4]), ("foo", 7, [1, 2])], "Unable to find partition: foo-7"),
    ([("foo", 0, [1, 9])], "Unknown broker id 9 (live brokers: 1,2,3,4)"),
    ([("foo", 0, [1, 4]), ("foo", 0, [2, 4])],
     "Partition reassignment contains duplicate topic partitions: foo-0"),
    ([("foo", 0, [1, 4, 1])], "Partition replica lists may contain only unique entries"),
])
async def test_bad_input_is_one_line_and_changes_nothing(fake, tmp_path, parts, contains):
    f = _file(tmp_path, "plan.json", plan(*parts))
    rc, out, err = await replog("reassign", "--bootstrap-server", fake.bootstrap, "--execute",
                                "--reassignment-json-file", f, "--throttle", "100")
    assert_one_line_error(rc, err, contains)
    assert fake.state.alter_requests == []
    assert fake.state.topics["foo"].configs == {} and not any(fake.state.broker_configs.values())


async def test_refused_request_prints_each_partition_and_restores_throttles(fake, tmp_path):
    s = fake.state
    s.topics["foo"].configs["leader.replication.throttled.replicas"] = "2:3"
    s.broker_configs["1"] = {"leader.replication.throttled.rate": "77"}
    # The controller refuses foo-1 (say, the move would remove every in-sync replica), so it
    # refuses the whole request (foo-0 "not started").
    s.refuse[("foo", 1)] = (ErrorCode.INVALID_REPLICA_ASSIGNMENT, "invalid replicas [3, 2]")
    f = _file(tmp_path, "plan.json", plan(("foo", 0, [1, 4]), ("foo", 1, [3, 2])))
    rc, out, err = await replog("reassign", "--bootstrap-server", fake.bootstrap, "--execute",
                                "--reassignment-json-file", f, "--throttle", "100")
    assert rc == 1, (out, err)
    assert err.splitlines() == [
        "Error: foo-1: INVALID_REPLICA_ASSIGNMENT: invalid replicas [3, 2]",
        "Error: foo-0: INVALID_REQUEST: not started: ['foo-1']"]
    assert "Successfully" not in out
    assert _replicas(fake, "foo") == [[1, 2], [2, 3], [3, 1]]
    assert s.topics["foo"].configs == {"leader.replication.throttled.replicas": "2:3"}
    assert {k: v for k, v in s.broker_configs.items() if v} == \
        {"1": {"leader.replication.throttled.rate": "77"}}


async def test_generate_over_the_live_brokers(fake, tmp_path):
    f = _file(tmp_path, "topics.json", '{"version":1,"topics":[{"topic":"foo"}]}')
    b = ["--bootstrap-server", fake.bootstrap, "--generate", "--topics-to-move-json-file", f]
    rc, out, err = await replog("reassign", *b, "--broker-list", "2,3,4")
    assert (rc, err) == (0, "")
    lines = out.split("\n")
    assert lines[0] == "Current partition replica assignment"
    assert parse_reassignment(lines[1]) == {("foo", 0): [1, 2], ("foo", 1): [2, 3],
                                            ("foo", 2): [3, 1]}
    assert lines[2:4] == ["", "Proposed partition reassignment configuration"]
    proposed = parse_reassignment(lines[4])
    assert sorted(r[0] for r in proposed.values()) == [2, 3, 4]
    assert all(len(r) == 2 and set(r) <= {2, 3, 4} for r in proposed.values())
    for extra, contains in ([("--broker-list", "2,5"), "Unknown broker id 5"],
                            [("--broker-list", "2,2"), "Broker list contains duplicate entries: 2"],
                            [("--broker-list", "a"), "integer broker ids"]):
        rc, _, err = await replog("reassign", *b, *extra)
        assert_one_line_error(rc, err, contains)
    f = _file(tmp_path, "missing.json", '{"version":1,"topics":[{"topic":"nope"}]}')
    rc, _, err = await replog("reassign", "--bootstrap-server", fake.bootstrap, "--generate",
                              "--topics-to-move-json-file", f, "--broker-list", "1,2")
    assert_one_line_error(rc, err, "Topic 'nope' does not exist")


# ---------------------------------------------------------------------------- real cluster

def _run(*args: str) -> tuple[int, str, str]:
    return asyncio.run(replog(*args, timeout=120))


def _describe(bootstrap: str, topic: str) -> list[str]:
    rc, out, err = _run("topics", "describe", "--bootstrap-server", bootstrap, "--topic", topic)
    assert rc == 0, err
    return out.splitlines()[1:]


def _dynamic(bootstrap: str, entity_type: str, name: str) -> dict[str, str]:
    async def read():
        async with AdminClient(bootstrap) as admin:
            got = (await admin.describe_configs([(entity_type, name)]))[(entity_type, name)]
            assert not isinstance(got, KafkaError), got
            source = "DYNAMIC_TOPIC_CONFIG" if entity_type == "topics" else \
                "DYNAMIC_BROKER_CONFIG"
            return {e.name: e.value for e in got if e.source == source}
    return asyncio.run(read())


def _create_foo(bootstrap: str, assignment: dict[int, list[int]], records: int = 200) -> None:
    async def run():
        async with AdminClient(bootstrap) as admin:
            await admin.create_topic("foo", replica_assignment=assignment)
        async with Producer(bootstrap, acks="all", max_block_ms=30000) as producer:
            for i in range(records):
                await producer.send("foo", b"v-%d" % i, partition=i % len(assignment))
            await producer.flush()
    asyncio.run(run())


@pytest.mark.integration
def test_generate_and_bad_input_against_a_real_cluster(cluster_factory, tmp_path):
    """Needs no reassignment RPC: everything is refused before the first change."""
    cluster = cluster_factory(brokers=4)
    b = cluster.bootstrap_servers
    _create_foo(b, {0: [1, 2], 1: [2, 3], 2: [3, 1]}, records=30)
    topics = _file(tmp_path, "topics.json", '{"version":1,"topics":[{"topic":"foo"}]}')
    rc, out, err = _run("reassign", "--bootstrap-server", b, "--generate",
                        "--topics-to-move-json-file", topics, "--broker-list", "2,3,4")
    assert (rc, err) == (0, "")
    lines = out.split("\n")
    assert parse_reassignment(lines[1]) == {("foo", 0): [1, 2], ("foo", 1): [2, 3],
                                            ("foo", 2): [3, 1]}
    assert all(set(r) <= {2, 3, 4} and len(r) == 2
               for r in parse_reassignment(lines[4]).values())

    before = _describe(b, "foo")
    cluster.broker(4).stop()

    async def live():
        async with AdminClient(b) as admin:
            return set(await admin.live_brokers())
    wait_until(lambda: asyncio.run(live()) == {1, 2, 3}, what="broker 4 gone from metadata")
    for parts, contains in [
            ([("nope", 0, [1, 2])], "Topic 'nope' does not exist"),
            ([("foo", 0, [1, 3]), ("foo", 5, [1, 2])], "Unable to find partition: foo-5"),
            ([("foo", 0, [1, 4])], "Unknown broker id 4 (live brokers: 1,2,3)"),
            ([("foo", 0, [1, 3]), ("foo", 0, [2, 3])],
             "Partition reassignment contains duplicate topic partitions: foo-0")]:
        f = _file(tmp_path, "plan.json", plan(*parts))
        rc, _, err = _run("reassign", "--bootstrap-server", b, "--execute",
                          "--reassignment-json-file", f, "--throttle", "1000")
        assert_one_line_error(rc, err, contains)
    f = _file(tmp_path, "bad.json", '{"version":1,"partitions":[{"topic":"foo",')
    rc, _, err = _run("reassign", "--bootstrap-server", b, "--execute",
                      "--reassignment-json-file", f)
    assert_one_line_error(rc, err, "not valid JSON")
    assert _describe(b, "foo") == before
    assert _dynamic(b, "topics", "foo") == {}
    assert all(_dynamic(b, "brokers", str(i)) == {} for i in (1, 2, 3))


@pytest.mark.integration
def test_move_cancel_and_complete_with_throttles(cluster_factory, tmp_path):
    """Needs the controller's AlterPartitionReassignments and ListPartitionReassignments."""
    cluster = cluster_factory(overrides={"zookeeper.session.timeout.ms": 60000})
    b = cluster.bootstrap_servers
    _create_foo(b, {0: [1, 2], 1: [2, 1]})
    reassign = ("reassign", "--bootstrap-server", b)
    f = _file(tmp_path, "plan.json", plan(("foo", 0, [1, 3])))

    # Broker 3 is stopped (SIGSTOP) but still registered: the move is accepted and cannot
    # finish, so the in-progress views can be read without a race. (No throttle here: its
    # broker config would have to be written by broker 3 itself.)
    cluster.broker(3).pause()
    try:
        rc, out, err = _run(*reassign, "--execute", "--reassignment-json-file", f)
        assert (rc, err) == (0, "")
        assert out == ("Current partition replica assignment\n\n"
                       '{"version":1,"partitions":[{"topic":"foo","partition":0,'
                       '"replicas":[1,2],"log_dirs":["any","any"]}]}\n\n'
                       "Save this to use as the --reassignment-json-file option during "
                       "rollback\nSuccessfully started partition reassignment for foo-0\n")
        rc, out, _ = _run(*reassign, "--list")
        assert out == ("Current partition reassignments:\n"
                       "foo-0: replicas: 1,3,2. adding: 3. removing: 2.\n"), out
        line = _describe(b, "foo")[0]
        assert "\tReplicas: 1,3,2\t" in line and \
            "\tAdding Replicas: 3\tRemoving Replicas: 2\t" in line, line
        rc, out, _ = _run(*reassign, "--verify", "--reassignment-json-file", f)
        assert out == ("Status of partition reassignment:\n"
                       "Reassignment of partition foo-0 is still in progress.\n"
                       "  Replica 3: not created yet (leader 1).\n"), out
        f2 = _file(tmp_path, "more.json", plan(("foo", 1, [2, 3])))
        rc, _, err = _run(*reassign, "--execute", "--reassignment-json-file", f2)
        assert_one_line_error(rc, err, CANNOT_EXECUTE_BECAUSE_OF_EXISTING)
        rc, out, err = _run(*reassign, "--cancel", "--reassignment-json-file", f,
                            "--preserve-throttles")
        assert (rc, out, err) == (
            0, "Successfully cancelled partition reassignment for: foo-0\n", "")
    finally:
        cluster.broker(3).resume()
    wait_until(lambda: "\tReplicas: 1,2\t" in _describe(b, "foo")[0],
               what="foo-0 back on 1,2")

    # A refused plan changes nothing: foo-7 does not exist (the controller's own refusals
    # are checked against the fake above).
    bad = _file(tmp_path, "bad.json", plan(("foo", 0, [1, 3]), ("foo", 7, [2, 1])))
    rc, out, err = _run(*reassign, "--execute", "--reassignment-json-file", bad,
                        "--throttle", "1000")
    assert rc == 1 and "Successfully" not in out
    assert len(err.splitlines()) == 1 and "foo-7" in err, err
    assert _dynamic(b, "topics", "foo") == {}
    assert "\tReplicas: 1,2\t" in _describe(b, "foo")[0]

    rc, out, _ = _run(*reassign, "--execute", "--reassignment-json-file", f,
                      "--throttle", "10000000")
    assert rc == 0 and out.endswith(
        "Warning: You must run --verify periodically, until the reassignment completes, to "
        "ensure the throttle is removed.\n"
        "The inter-broker throttle limit was set to 10000000 B/s\n"
        "Successfully started partition reassignment for foo-0\n"), out
    # Kafka's throttles; they stay until a --verify finds the move done.
    assert _dynamic(b, "topics", "foo") == {
        "leader.replication.throttled.replicas": "0:1,0:2",
        "follower.replication.throttled.replicas": "0:3"}
    assert _dynamic(b, "brokers", "3") == {"leader.replication.throttled.rate": "10000000",
                                           "follower.replication.throttled.rate": "10000000"}
    wait_until(lambda: "Reassignment of partition foo-0 is completed." in _run(
        *reassign, "--verify", "--reassignment-json-file", f, "--preserve-throttles")[1],
        what="the move to finish")
    rc, out, _ = _run(*reassign, "--verify", "--reassignment-json-file", f)
    assert out == ("Status of partition reassignment:\n"
                   "Reassignment of partition foo-0 is completed.\n"
                   "Clearing broker-level throttles on brokers 1,2,3\n"
                   "Clearing topic-level throttles on topic foo\n")
    assert _dynamic(b, "topics", "foo") == {}
    assert all(_dynamic(b, "brokers", str(i)) == {} for i in (1, 2, 3))
    line = _describe(b, "foo")[0]
    assert "\tReplicas: 1,3\t" in line and "Adding Replicas" not in line, line
    rc, out, _ = _run(*reassign, "--list")
    assert out == "No partition reassignments found.\n"
