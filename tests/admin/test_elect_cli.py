"""`replog elect` (kafka-leader-election): Kafka's option checks, JSON and result lines; and,
against a real cluster, a preferred election returning leadership after a broker bounce."""

from __future__ import annotations

import asyncio
import re

import pytest

from admin.elect_cmd import parse_election_json, parse_election_type, result_lines
from client import AdminClient
from client.errors import KafkaError, UnknownTopicError
from common.errors import ErrorCode, ReplogError
from tests.admin.test_cli import assert_one_line_error, replog
from tests.polling import wait_until

B = ["--bootstrap-server", "127.0.0.1:1"]


def test_election_type_is_case_insensitive():
    assert parse_election_type("preferred") == "PREFERRED"
    assert parse_election_type("UNCLEAN") == "UNCLEAN"
    with pytest.raises(ReplogError, match="Invalid election type 'fast'"):
        parse_election_type("fast")


def test_election_json():
    assert parse_election_json('{"partitions":[{"topic":"foo","partition":1},'
                               '{"topic":"bar","partition":0}]}') == [("foo", 1), ("bar", 0)]
    for text, message in [
            ("{oops", "not valid JSON"),
            ('{"version":1}', 'Replica election data is missing "partitions" field'),
            ('{"partitions":[]}', "Replica election data is empty"),
            ('{"partitions":[{"topic":"a","partition":0},{"topic":"a","partition":0}]}',
             "Replica election data contains duplicate partitions: a-0"),
            ('{"partitions":[{"topic":"a","partition":"0"}]}',
             'Entry 0 of partitions needs a non-negative integer "partition"'),
            ('{"partitions":[{"partition":0}]}', 'Entry 0 of partitions needs a string "topic"')]:
        with pytest.raises(ReplogError, match=re.escape(message)):
            parse_election_json(text)


def test_result_lines_are_kafkas():
    lines, failed = result_lines("PREFERRED", {
        ("foo", 1): None, ("foo", 0): None,
        ("foo", 2): KafkaError(ErrorCode.ELECTION_NOT_NEEDED, "leader is preferred"),
        ("foo", 3): KafkaError(ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, "broker 2 is down")})
    assert lines == [
        "Successfully completed leader election (PREFERRED) for partitions foo-0, foo-1",
        "Valid replica already elected for partitions foo-2",
        "Error completing leader election (PREFERRED) for partition: foo-3: "
        "PREFERRED_LEADER_NOT_AVAILABLE: broker 2 is down"]
    assert failed == 1
    assert result_lines("UNCLEAN", {}) == ([], 0)


@pytest.mark.parametrize("args,contains", [
    (["--all-topic-partitions"], "Missing required option(s): [election-type]"),
    (["--election-type", "sideways", "--all-topic-partitions"], "Invalid election type"),
    (["--election-type", "preferred"], "One and only one of the following options is "
                                       "required: [topic], [all-topic-partitions], "
                                       "[path-to-json-file]"),
    (["--election-type", "preferred", "--all-topic-partitions", "--topic", "t",
      "--partition", "0"], "One and only one of the following options is required"),
    (["--election-type", "preferred", "--topic", "t"], "Missing required option(s): [partition]"),
    (["--election-type", "preferred", "--all-topic-partitions", "--partition", "0"],
     "Option [partition] is only allowed if [topic] is used"),
    (["--election-type", "preferred", "--path-to-json-file", "/no/such.json", "--partition",
      "1"], "Option [partition] is only allowed if [topic] is used"),
    (["--election-type", "preferred", "--path-to-json-file", "/no/such.json"], "No such file"),
    (["--election-type", "PREFERRED", "--all-topic-partitions", "--timeout-ms", "300"],
     "no broker answered"),
])
async def test_user_errors_are_one_line(args, contains):
    rc, _, err = await replog("elect", *B, *args)
    assert_one_line_error(rc, err, contains)


# ---------------------------------------------------------------------------- real cluster

def _leaders(bootstrap: str, topic: str) -> dict[int, tuple[int, tuple[int, ...], tuple]]:
    """Partition -> (leader, replicas, ISR) from any broker's Metadata. A broker that has just
    restarted answers UNKNOWN_TOPIC_OR_PARTITION until the controller's UpdateMetadata reaches
    it (as Kafka's does): that answer means "ask again", not "no topic" (a CI run failed on
    it right after broker 1's restart)."""
    async def read():
        async with AdminClient(bootstrap) as admin:
            t = (await admin.describe_topics([topic]))[topic]
            return {p.partition: (p.leader, p.replicas, p.isr) for p in t.partitions}
    return wait_until(lambda: asyncio.run(read()), what=f"{topic} in a broker's metadata",
                      ignore=(UnknownTopicError,))


@pytest.mark.integration
def test_preferred_election_after_a_bounce_returns_leadership(cluster_factory, tmp_path):
    cluster = cluster_factory(overrides={"auto.leader.rebalance.enable": "false"})
    b = cluster.bootstrap_servers

    async def create():
        async with AdminClient(b) as admin:
            await admin.create_topic("foo", 3, 3)
    asyncio.run(create())
    wait_until(lambda: all(len(isr) == 3 and leader == replicas[0]
                           for leader, replicas, isr in _leaders(b, "foo").values()),
               what="foo fully replicated, led by its preferred replicas")

    # Bounce broker 1: the partitions it preferred-led move to another replica and stay
    # there after it returns (auto rebalance is off).
    led_by_1 = [p for p, (_, replicas, _) in _leaders(b, "foo").items() if replicas[0] == 1]
    assert led_by_1
    cluster.broker(1).stop()  # controlled shutdown: its leaderships move to other replicas
    wait_until(lambda: all(leader != 1 for leader, _, _ in _leaders(b, "foo").values()),
               what="leadership to leave broker 1")
    cluster.broker(1).start()
    wait_until(lambda: all(len(isr) == 3 for _, _, isr in _leaders(b, "foo").values()),
               what="broker 1 back in every ISR")
    assert all(_leaders(b, "foo")[p][0] != 1 for p in led_by_1)

    rc, out, err = asyncio.run(replog("elect", "--bootstrap-server", b, "--election-type",
                                      "preferred", "--all-topic-partitions"))
    assert (rc, err) == (0, ""), out
    moved = ", ".join(f"foo-{p}" for p in sorted(led_by_1))
    assert f"Successfully completed leader election (PREFERRED) for partitions {moved}\n" in out
    # The answer follows the controller's write; the brokers' metadata follows its
    # UpdateMetadata (a flake read it before it arrived).
    wait_until(lambda: all(leader == replicas[0]
                           for leader, replicas, _ in _leaders(b, "foo").values()),
               what="the preferred leaders in the brokers' metadata")

    # Again: nothing to do for any of them (Kafka's "Valid replica already elected").
    path = tmp_path / "elect.json"
    path.write_text('{"partitions":[{"topic":"foo","partition":0},'
                    '{"topic":"foo","partition":2}]}')
    rc, out, err = asyncio.run(replog("elect", "--bootstrap-server", b, "--election-type",
                                      "PREFERRED", "--path-to-json-file", str(path)))
    assert (rc, out, err) == (0, "Valid replica already elected for partitions foo-0, foo-2\n",
                              "")
    # An unknown partition fails with Kafka's line and exit 1.
    rc, out, err = asyncio.run(replog("elect", "--bootstrap-server", b, "--election-type",
                                      "preferred", "--topic", "foo", "--partition", "9"))
    assert rc == 1 and out.startswith(
        "Error completing leader election (PREFERRED) for partition: foo-9: "
        "UNKNOWN_TOPIC_OR_PARTITION"), out
    assert err == "Error: 1 replica(s) could not be elected\n"
