"""The admin JSON files fuzzed: kafka-reassign-partitions' reassignment and topics-to-move
files (admin/reassign/parsing.py), kafka-leader-election's --path-to-json-file (admin/elect_cmd.py)
and the log-dirs option lists (admin/log_dirs_cmd.py).

Property: a parser returns what the file says or raises ReplogError (which the CLI prints as
one line, exit 1), never anything else; what it returns fits the requests it goes into
(int32 partitions and broker ids). The CLI itself is run on the findings: one line on stderr,
exit code 1, no traceback, before anything is sent.
"""
from __future__ import annotations

import json

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from admin import elect_cmd, log_dirs_cmd
from admin.cli import main
from admin.reassign import parsing
from common.errors import ReplogError
from tests.security.fuzzing import FUZZ, JSON_VALUES, byte_mutations, mutations

INT32 = range(2**31)

REASSIGNMENT = json.dumps({"version": 1, "partitions": [
    {"topic": "foo", "partition": 0, "replicas": [1, 2], "log_dirs": ["any", "/d1"]},
    {"topic": "bar", "partition": 3, "replicas": [3]}]})
TOPICS = json.dumps({"version": 1, "topics": [{"topic": "foo"}, {"topic": "bar"}]})
ELECTION = json.dumps({"partitions": [{"topic": "foo", "partition": 1},
                                      {"topic": "bar", "partition": 0}]})


def _reassignment(text: str):
    out = parsing.parse_reassignment(text)
    assert all(p in INT32 and r and all(b in INT32 for b in r) for (_, p), r in out.items())
    parsing.parse_log_dirs(text)  # runs on what parse_reassignment accepted
    return out


def _topics(text: str):
    return parsing.parse_topics_to_move(text)


def _election(text: str):
    out = elect_cmd.parse_election_json(text)
    assert all(p in INT32 for _, p in out)
    return out


PARSERS = [("reassignment", _reassignment, REASSIGNMENT), ("topics", _topics, TOPICS),
           ("election", _election, ELECTION)]
IDS = [p[0] for p in PARSERS]


def _parses_or_refuses(parse, text: str) -> None:
    try:
        parse(text)
    except ReplogError as e:
        assert str(e) and "\n" not in str(e).strip()


@pytest.mark.parametrize("name,parse,valid", PARSERS, ids=IDS)
def test_the_valid_file_parses(name, parse, valid):
    assert parse(valid)


@pytest.mark.parametrize("name,parse,valid", PARSERS, ids=IDS)
@FUZZ
@given(text=st.text(max_size=200))
@example(text="[" * 100_000)
@example(text='{"partitions":' * 30_000)
def test_arbitrary_text(name, parse, valid, text):
    _parses_or_refuses(parse, text)


@pytest.mark.parametrize("name,parse,valid", PARSERS, ids=IDS)
@FUZZ
@given(value=JSON_VALUES)
def test_arbitrary_json(name, parse, valid, value):
    _parses_or_refuses(parse, json.dumps(value))


@pytest.mark.parametrize("name,parse,valid", PARSERS, ids=IDS)
@FUZZ
@given(data=st.data())
def test_the_valid_file_with_one_value_changed(name, parse, valid, data):
    _parses_or_refuses(parse, json.dumps(data.draw(mutations(json.loads(valid)))))


@pytest.mark.parametrize("name,parse,valid", PARSERS, ids=IDS)
@FUZZ
@given(data=st.data())
def test_the_valid_file_with_bytes_changed(name, parse, valid, data):
    raw = data.draw(byte_mutations(valid.encode()))
    _parses_or_refuses(parse, raw.decode("utf-8", errors="replace"))


@FUZZ
@given(text=st.none() | st.text(max_size=40))
def test_log_dirs_broker_lists(text):
    try:
        out = log_dirs_cmd.parse_list(text, "broker-list", int)
    except ReplogError:
        return
    assert out is None or all(isinstance(b, int) for b in out)


# ------------------------------------------------------------------ what the fuzzing found

@pytest.mark.parametrize("parse,text", [
    (_reassignment, "[" * 100_000),
    (_topics, "[" * 100_000),
    (_election, "[" * 100_000),
    (_reassignment, '{"partitions":[{"topic":"t","partition":2147483648,"replicas":[1]}]}'),
    (_reassignment, '{"partitions":[{"topic":"t","partition":0,"replicas":[-1]}]}'),
    (_reassignment, '{"partitions":[{"topic":"t","partition":0,"replicas":[4294967296]}]}'),
    (_election, '{"partitions":[{"topic":"t","partition":2147483648}]}'),
    (_topics, '{"topics":[{"topic":"t"}],"version":1.5}'),
], ids=["reassign-nested", "topics-nested", "elect-nested", "partition-beyond-int32",
        "negative-replica", "replica-beyond-int32", "elect-beyond-int32", "float-version"])
def test_what_the_fuzzing_found_is_one_clear_error(parse, text):
    with pytest.raises(ReplogError):
        parse(text)


@pytest.mark.parametrize("argv", [
    ["reassign", "--execute", "--reassignment-json-file", "{file}"],
    ["reassign", "--verify", "--reassignment-json-file", "{file}"],
    ["elect", "--election-type", "preferred", "--path-to-json-file", "{file}"],
], ids=["reassign-execute", "reassign-verify", "elect"])
@pytest.mark.parametrize("content", [b"[" * 100_000, b"\xff\xfe\x00", b'{"partitions":7}'],
                         ids=["nested", "not-utf8", "wrong-shape"])
def test_the_cli_says_one_line_and_exits_1(tmp_path, capsys, argv, content):
    f = tmp_path / "in.json"
    f.write_bytes(content)
    # nothing listens there: the file must be refused before any request is sent
    code = main([a.replace("{file}", str(f)) for a in argv] +
                ["--bootstrap-server", "127.0.0.1:1"])
    err = capsys.readouterr().err
    assert code == 1
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert "JSON" in err or "partitions" in err, err  # the file's fault, not the connection's
