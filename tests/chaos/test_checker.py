"""The chaos checker on hand-made histories: a clean one passes, and each planted violation is
caught by its own property, with evidence naming the operations."""

from __future__ import annotations

import copy

import pytest

from chaos import checker
from chaos.history import History, parse_value, read_history, write_value


class Builder:
    """Builds a history the way the runner writes one, with made-up times."""

    def __init__(self):
        self.ops: list[dict] = []
        self.later = 0.0

    def op(self, process, type_, f, value):
        self.ops.append({"index": len(self.ops), "time": round(self.later + len(self.ops) * 0.1,
                                                               4),
                         "wall": 0.0, "process": process, "type": type_, "f": f, "value": value})

    def wait(self, seconds):
        self.later += seconds

    def send(self, writer, seq, partition, acks, outcome, offset=None, error=None):
        value = write_value(writer, seq, acks)
        v = {"partition": partition, "value": value, "acks": acks}
        self.op(f"writer-{writer}", "invoke", "send", v)
        done = dict(v)
        if outcome == "ok":
            done["offset"] = offset
        else:
            done["error"] = error or "KafkaTimeoutError"
        self.op(f"writer-{writer}", outcome, "send", done)
        return value

    def read(self, process, records):
        self.op(process, "invoke", "read", {})
        self.op(process, "ok", "read", {"records": [list(r) for r in records]})

    def final(self, records):
        self.op("final-reader", "invoke", "final-read", {})
        self.op("final-reader", "ok", "final-read", {"records": [list(r) for r in records]})

    def replicas(self, partitions):
        self.op("checker", "invoke", "replicas", {})
        self.op("checker", "ok", "replicas", {"partitions": partitions})


def replica_state(partition, hw, batches, brokers=(1, 2, 3), isr=None):
    return {"partition": partition, "hw": hw, "replicas": list(brokers),
            "isr": list(isr if isr is not None else brokers),
            "logs": {str(b): copy.deepcopy(batches) for b in brokers},
            "kafka_python": {str(b): {"crc_ok": True, "agrees": True} for b in brokers}}


def clean() -> Builder:
    """Two acks=all writers on partition 0, an acks=1 writer on partition 1, an unknown write
    that landed and one that did not, a failed write, a reader, the final read, identical
    replicas with full ISRs."""
    h = Builder()
    log0 = [h.send(0, 0, 0, "all", "ok", 0), h.send(1, 0, 0, "all", "ok", 1),
            h.send(0, 1, 0, "all", "info"),  # landed at 2 although its ack was lost
            h.send(1, 1, 0, "all", "ok", 3)]
    h.send(0, 2, 0, "all", "info")  # never landed: fine either way
    h.send(1, 2, 0, "all", "fail", error="NotEnoughReplicasError")
    log1 = [h.send(2, 0, 1, "1", "ok", 0), h.send(2, 1, 1, "1", "ok", 1)]
    h.send(2, 2, 1, "1", "ok", 2)  # acks=1, lost with its leader: allowed
    h.read("reader-0", [(0, 0, log0[0]), (0, 1, log0[1]), (1, 0, log1[0])])
    h.read("reader-0", [(0, 2, log0[2]), (1, 1, log1[1]), (0, 3, log0[3])])
    h.final([(0, i, v) for i, v in enumerate(log0)] + [(1, i, v) for i, v in enumerate(log1)])
    h.replicas([replica_state(0, 4, [[0, 1, "aa"], [2, 2, "bb"], [3, 3, "cc"]]),
                replica_state(1, 2, [[0, 1, "dd"], [2, 2, "ee"]])])
    return h


def props(verdict: checker.Verdict) -> set[str]:
    return {v.property for v in verdict.violations}


def test_clean_history_is_valid():
    v = checker.check(clean().ops, session_timeout_s=4.0)
    assert v.valid, v.describe()
    assert v.stats["acked_all"] == 3 and v.stats["acked_one"] == 3
    assert v.stats["unknown"] == 2 and v.stats["failed"] == 1
    assert v.summary().startswith("VALID")


def test_lost_acked_write_is_caught():
    h = clean()
    final = next(op for op in h.ops if op["f"] == "final-read" and op["type"] == "ok")
    final["value"]["records"] = [r for r in final["value"]["records"] if r[:2] != [0, 3]]
    v = checker.check(h.ops)
    assert props(v) == {"acked-write-lost"}
    (viol,) = v.violations
    assert viol.evidence[0]["value"] == "w1:1:all" and viol.evidence[0]["offset"] == 3
    assert "acked-write-lost" in v.summary()


def test_acked_write_overwritten_in_a_read_is_caught():
    h = clean()
    h.ops.insert(0, None)  # placeholder, replaced below to keep indices simple
    h.ops.pop(0)
    h.read("reader-1", [(0, 0, "w9:9:all")])  # someone read another value at an acked offset
    v = checker.check(h.ops)
    assert {"acked-write-lost", "offset-two-values"} <= props(v)


def test_duplicate_is_caught():
    h = clean()
    final = next(op for op in h.ops if op["f"] == "final-read" and op["type"] == "ok")
    final["value"]["records"].append([1, 2, "w2:0:1"])  # the same value at a second offset
    v = checker.check(h.ops)
    assert "duplicate" in props(v)
    dup = next(x for x in v.violations if x.property == "duplicate")
    assert dup.evidence[0] == {"value": "w2:0:1", "at": [(1, 0), (1, 2)]}


def test_an_offset_with_two_values_is_caught():
    h = clean()
    h.read("reader-1", [(1, 1, "w2:7:1")])  # partition 1 offset 1 held w2:1:1 before
    v = checker.check(h.ops)
    assert props(v) == {"offset-two-values"}


def test_failed_write_present_is_caught():
    h = clean()
    final = next(op for op in h.ops if op["f"] == "final-read" and op["type"] == "ok")
    final["value"]["records"].append([0, 4, "w1:2:all"])  # the NOT_ENOUGH_REPLICAS one
    v = checker.check(h.ops)
    assert props(v) == {"failed-write-present"}


@pytest.mark.parametrize("records,what", [([(0, 2, "w1:0:all"), (0, 3, "w1:1:all")], "gap"),
                                          ([(0, 0, "w0:0:all")], "went back")])
def test_read_order_violations_are_caught(records, what):
    h = clean()
    h.read("reader-7", [(0, 0, "w0:0:all")] if what == "gap" else [(0, 1, "w1:0:all")])
    h.read("reader-7", records[:1] if what == "gap" else records)
    v = checker.check(h.ops)
    assert "read-order" in props(v)
    ro = next(x for x in v.violations if x.property == "read-order")
    assert ro.evidence[0]["what"] == what


def test_reordered_writer_is_caught():
    h = Builder()
    a = h.send(0, 0, 0, "all", "ok", 1)  # acknowledged at offset 1 ...
    b = h.send(0, 1, 0, "all", "info")  # ... then a later send of the same writer sits at 0
    h.final([(0, 0, b), (0, 1, a)])
    h.replicas([replica_state(0, 2, [[0, 1, "aa"]])])
    v = checker.check(h.ops)
    assert props(v) == {"writer-order"}
    assert v.violations[0].evidence[0]["sent_later"] == b


def test_divergent_replica_byte_is_caught():
    h = clean()
    rep = next(op for op in h.ops if op["f"] == "replicas" and op["type"] == "ok")
    rep["value"]["partitions"][0]["logs"]["3"][1][2] = "bX"  # one batch's bytes differ
    v = checker.check(h.ops)
    assert props(v) == {"replica-divergence"}
    ev = v.violations[0].evidence[0]
    assert ev["partition"] == 0 and ev["brokers"] == [1, 3] and ev["batch"] == 1


def test_divergence_above_the_hw_is_allowed():
    h = clean()
    rep = next(op for op in h.ops if op["f"] == "replicas" and op["type"] == "ok")
    rep["value"]["partitions"][0]["logs"]["2"].append([4, 4, "zz"])  # not yet committed
    assert checker.check(h.ops).valid


def test_replica_out_of_isr_and_parser_disagreement_are_caught():
    h = clean()
    rep = next(op for op in h.ops if op["f"] == "replicas" and op["type"] == "ok")
    rep["value"]["partitions"][1]["isr"] = [1, 2]
    rep["value"]["partitions"][0]["kafka_python"]["2"] = {"crc_ok": False, "agrees": True}
    v = checker.check(h.ops)
    assert props(v) == {"isr-not-full", "kafka-python-disagrees"}


def test_missing_final_read_is_incomplete():
    h = clean()
    ops = [op for op in h.ops if op["f"] != "final-read"]
    assert "incomplete-history" in props(checker.check(ops))


def test_availability_is_reported():
    h = Builder()
    h.send(0, 0, 0, "all", "ok", 0)
    h.send(0, 1, 0, "all", "info")
    h.send(0, 2, 0, "all", "info")
    h.send(0, 3, 0, "all", "ok", 1)
    gaps = checker.unavailability(h.ops, checker.writes(h.ops))
    assert gaps[0] == pytest.approx(0.6)


def test_history_round_trips_through_json_lines(tmp_path):
    hist = History(tmp_path / "h.jsonl")
    hist.record("writer-0", "invoke", "send", {"partition": 0, "value": "w0:0:all",
                                               "acks": "all"})
    hist.record("writer-0", "ok", "send", {"partition": 0, "value": "w0:0:all",
                                           "acks": "all", "offset": 0})
    hist.close()
    ops = read_history(tmp_path / "h.jsonl")
    assert ops == hist.ops
    assert parse_value("w0:17:all") == ("w0", 17, "all")
    assert parse_value("hello") is None


def test_client_error_is_caught():
    h = clean()
    h.op("writer-0", "invoke", "send", {"partition": 5, "value": "w0:9:all", "acks": "all"})
    h.op("writer-0", "info", "send", {"partition": 5, "value": "w0:9:all", "acks": "all",
                                      "error": "ValueError: Invalid partition given with "
                                               "record: 5 is not in the range [0...3).",
                                      "unexpected": True})
    v = checker.check(h.ops)
    assert props(v) == {"client-error"}
    assert "Invalid partition" in v.violations[0].evidence[0]["error"]


def _nemesis(h, f, fault, result=None):
    h.op("nemesis", "invoke", f, {"fault": fault})
    h.op("nemesis", "ok", f, {"fault": fault, "result": result or {}})


def test_availability_per_fault_window_against_the_detection_bound():
    h = Builder()
    kill = {"index": 0, "at_s": 0.0, "nemesis": "kill", "target": ["leader"], "duration_s": 2.0}
    elect = {"index": 1, "at_s": 0.0, "nemesis": "elect", "target": ["all"], "duration_s": 0.0}
    down = {"index": 2, "at_s": 0.0, "nemesis": "hard-kill", "target": ["leader"],
            "duration_s": 8.0}
    h.send(0, 0, 0, "all", "ok", 0)  # t=0.1
    _nemesis(h, "start", kill, {"killed": "broker-1"})  # t=0.3
    h.wait(7.6)  # partition 0's next acknowledgement comes 8 s later, past the 4 + 2 + 1 s
    h.send(0, 1, 0, "all", "ok", 1)
    _nemesis(h, "start", elect)  # an instant
    _nemesis(h, "stop", kill, {"started": ["broker-1"]})
    h.send(0, 2, 0, "all", "ok", 2)
    _nemesis(h, "start", down, {"killed": "broker-2"})  # never stopped: ends at the heal
    h.send(0, 3, 0, "all", "ok", 3)
    h.op("nemesis", "ok", "healed", {"isr_full": True})
    h.send(0, 4, 0, "all", "ok", 4)
    s = checker.stats(h.ops, checker.writes(h.ops), 4.0, 2.0)
    assert s["detection_bound_s"] == 7.0
    by = {w["nemesis"]: w for w in s["availability"]}
    assert by["kill"]["exceeds"] and by["kill"]["longest_gap_s"] == pytest.approx(8.0)
    assert by["kill"]["partition"] == 0 and by["kill"]["result"] == {"killed": "broker-1"}
    assert by["elect"]["from_s"] == by["elect"]["to_s"] and not by["elect"]["exceeds"]
    assert by["hard-kill"]["to_s"] == next(op["time"] for op in h.ops if op["f"] == "healed")
    assert s["faults_past_bound"] == 1
    assert "1 of 3 fault window(s) past the 7.0s detection bound" in checker._stats_line(s)
    assert checker.check(h.ops).valid is False  # no final read: incomplete, yet reported
