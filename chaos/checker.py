"""The Jepsen-style checker: pure functions from a history (chaos/history.py) to a verdict.

Properties, each named in the verdict with its evidence (the operations that break it):

- ``acked-write-lost``: every write acknowledged with acks=all is read back after the heal
  exactly at its acknowledged offset, and no read ever saw another value there (acks=1 writes
  may be lost when a leader dies before its followers fetched them: Kafka's contract);
- ``duplicate``: no value is at two offsets (the workload's producer never retries, so a
  duplicate can only come from the brokers);
- ``offset-two-values``: no offset held two different values, across every read over time;
- ``failed-write-present``: a write that failed for certain (``fail``, e.g. NOT_ENOUGH_REPLICAS
  refused before the append) is nowhere in the log; ``info`` writes may be present or absent;
- ``read-order``: each consumer reads each partition's offsets in order, without a gap;
- ``writer-order``: a writer's record acknowledged before it sent a later record of the same
  partition sits at a lower offset than that later record;
- ``replica-divergence``: after the heal, every in-sync replica's log is byte-identical below
  the HW (batches read from the segment files: leader epoch and CRC included);
- ``kafka-python-disagrees``: kafka-python's independent parser reads every replica's batches
  with valid CRCs and the same records as replog's parser;
- ``isr-not-full``: after the heal every replica is back in its partition's ISR;
- ``incomplete-history``: the history has no final read or no replica states;
- ``client-error``: a writer or reader met an exception that is neither a Kafka error nor a
  timeout (e.g. a send to a partition outside the topic's metadata, which a broker answering
  with part of a topic's partitions causes; brokers answer only once registered:
  tests/broker/test_registration_fence.py::
  test_controller_requests_wait_for_the_brokers_registration).

The verdict also reports availability (informational, never a violation): per partition the
longest window without an acknowledged acks=all write, and per fault window (from its start
to its stop; to the heal for a fault never stopped; the instant of an admin operation) the
longest such gap that overlaps it, against the detection bound
``session timeout + replica.lag.time.max.ms + ELECTION_SLACK_S``: a dead or cut-off leader
is noticed once its ZooKeeper session expires, a dead follower holds acks=all back until it
leaves the ISR, and the election and the clients' metadata refresh take the slack. Faults
whose gap exceeds it are counted in the summary and listed with ``exceeds`` in
``verdict.json``.

One availability bound is a property, because Kafka's ZooKeeper-era design promises it:

- ``zookeeper-fault-bound``: a ZooKeeper leader change or the loss of a minority of the
  ensemble (``zk-leader-kill``, ``zk-minority``; the quorum holds) costs no controller
  election (``/controller_epoch`` the same at the fault's start and after its members are
  back: KafkaController acts on a new session only, never on a Disconnected; unless no
  running controller held ``/controller`` at the start, when an earlier fault owed the
  election, e.g. a killed controller whose session had not expired yet) and no acks=all
  write gap longer than the ZooKeeper session timeout after the fault started (produce does
  not touch ZooKeeper; the sessions move to the members left, as ZooKeeper's ClientCnxn
  does, within the timeout). Judged only for a window no other fault overlaps (an admin
  operation mid-fault has gaps of its own), and only for gaps that began at most
  ``ELECTION_SLACK_S`` before the fault (an earlier gap belongs to the fault before).
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

# A JSON object: a history entry (chaos/history.py: index, time, process, type, f, value), a
# piece of evidence, a fault window.
Json = dict[str, Any]

MAX_EVIDENCE = 5
ELECTION_SLACK_S = 1.0
# The ensemble keeps its quorum through these: check_zookeeper_faults holds them to a bound.
ZK_QUORUM_KEPT = frozenset({"zk-leader-kill", "zk-minority"})


@dataclass
class Violation:
    property: str
    message: str
    evidence: list[Json] = field(default_factory=list)
    count: int = 1

    def describe(self) -> str:
        more = f" ({self.count} in all)" if self.count > 1 else ""
        lines = [f"{self.property}: {self.message}{more}"]
        lines += [f"    {e}" for e in self.evidence[:MAX_EVIDENCE]]
        return "\n".join(lines)


@dataclass
class Verdict:
    violations: list[Violation]
    stats: dict[str, Any]

    @property
    def valid(self) -> bool:
        return not self.violations

    def summary(self) -> str:
        if self.valid:
            return "VALID: " + _stats_line(self.stats)
        names = sorted({v.property for v in self.violations})
        return f"INVALID ({', '.join(names)}): " + _stats_line(self.stats)

    def describe(self) -> str:
        return "\n".join([self.summary(), *(v.describe() for v in self.violations)])

    def to_json(self) -> dict[str, Any]:
        return {"valid": self.valid, "stats": self.stats,
                "violations": [{"property": v.property, "message": v.message,
                                "count": v.count, "evidence": v.evidence[:MAX_EVIDENCE]}
                               for v in self.violations]}


def _stats_line(s: dict[str, Any]) -> str:
    line = (f"{s.get('acked_all', 0)} acks=all and {s.get('acked_one', 0)} acks=1 writes "
            f"acknowledged, {s.get('unknown', 0)} unknown, {s.get('failed', 0)} failed; "
            f"{s.get('records_read', 0)} records read; longest acks=all write gap "
            f"{s.get('max_unavailable_s', 0):.1f}s")
    if s.get("zookeeper_faults"):
        zk = s["zookeeper_faults"]
        line += (f"; {sum(1 for f in zk if f['judged'])} of {len(zk)} ZooKeeper leader/"
                 f"minority fault(s) held to the {zk[0]['bound_s']:.1f}s session bound")
    if "detection_bound_s" in s:
        line += (f"; {s['faults_past_bound']} of {len(s['availability'])} fault window(s) past "
                 f"the {s['detection_bound_s']:.1f}s detection bound")
    return line


# ---------------------------------------------------------------------------- the history

@dataclass(frozen=True)
class Write:
    process: str
    invoke: Json
    complete: Json | None  # None: the run ended before it completed (counts as unknown)

    @property
    def partition(self) -> int:
        partition: int = self.invoke["value"]["partition"]
        return partition

    @property
    def value(self) -> str:
        value: str = self.invoke["value"]["value"]
        return value

    @property
    def acks(self) -> str:
        acks: str = self.invoke["value"]["acks"]
        return acks

    @property
    def outcome(self) -> str:
        return self.complete["type"] if self.complete is not None else "info"

    @property
    def offset(self) -> int | None:
        return self.done["value"].get("offset") if self.outcome == "ok" else None

    @property
    def done(self) -> Json:
        """The completion, of a write known to have completed."""
        assert self.complete is not None, self.invoke
        return self.complete


def writes(history: list[Json]) -> list[Write]:
    """Pair each send's invoke with its completion (the same process's next op)."""
    pending: dict[str, Json] = {}
    out: list[Write] = []
    for op in history:
        if op["f"] != "send":
            continue
        if op["type"] == "invoke":
            pending[op["process"]] = op
        else:
            inv = pending.pop(op["process"], None)
            if inv is not None:
                out.append(Write(op["process"], inv, op))
    out += [Write(p, inv, None) for p, inv in pending.items()]
    out.sort(key=lambda w: w.invoke["index"])
    return out


def _final(history: list[Json], f: str) -> Json | None:
    found = [op for op in history if op["f"] == f and op["type"] == "ok"]
    return found[-1] if found else None


def _final_read(history: list[Json]) -> Json:
    """The final read, of a history known to have one (final_log found it)."""
    op = _final(history, "final-read")
    assert op is not None
    return op


def final_log(history: list[Json]) -> dict[int, dict[int, str]] | None:
    """partition -> offset -> value, as read back after the heal."""
    op = _final(history, "final-read")
    if op is None:
        return None
    out: dict[int, dict[int, str]] = defaultdict(dict)
    for p, offset, value in op["value"]["records"]:
        out[p][offset] = value
    return out


# ---------------------------------------------------------------------------- the checks

def check(history: list[Json], session_timeout_s: float | None = None,
          lag_time_max_s: float | None = None) -> Verdict:
    ws = writes(history)
    log = final_log(history)
    violations: list[Violation] = []
    if log is None:
        violations.append(Violation("incomplete-history",
                                    "no final-read: the run ended before reading back"))
        log = {}
    elif not _final_read(history)["value"].get("complete", True):
        violations.append(Violation("incomplete-history", "the final read stopped before "
                                    "every partition's HW: lost writes may be unread ones"))
    violations += check_acked_writes(ws, log, history)
    violations += check_duplicates(log)
    violations += check_offsets_single_valued(history)
    violations += check_failed_writes_absent(ws, log)
    violations += check_read_order(history)
    violations += check_writer_order(ws, log)
    violations += check_client_errors(history)
    replicas = _final(history, "replicas")
    if replicas is None:
        violations.append(Violation("incomplete-history", "no replica states after the heal"))
    else:
        violations += check_replicas(replicas["value"]["partitions"])
    st = stats(history, ws, session_timeout_s, lag_time_max_s)
    if session_timeout_s is not None:
        judged = zookeeper_fault_bounds(history, ws, session_timeout_s)
        if judged:
            st["zookeeper_faults"] = judged
        violations += check_zookeeper_faults(judged)
    return Verdict([v for v in violations if v.count], st)


def _grouped(prop: str, message: str, evidence: list[Json]) -> list[Violation]:
    if not evidence:
        return []
    return [Violation(prop, message, evidence[:MAX_EVIDENCE], len(evidence))]


def check_acked_writes(ws: list[Write], log: dict[int, dict[int, str]],
                       history: list[Json]) -> list[Violation]:
    seen = _observations(history)
    lost = []
    for w in ws:
        if w.outcome != "ok" or w.acks != "all":
            continue
        p, o = w.partition, w.offset
        assert o is not None  # an acknowledged write has its offset
        at = log.get(p, {}).get(o)
        others = sorted(v for v in seen.get((p, o), ()) if v != w.value)
        if at != w.value or others:
            lost.append({"op": w.done["index"], "partition": p, "offset": o,
                         "value": w.value, "final_read_there": at, "other_reads_there": others})
    return _grouped("acked-write-lost", "acks=all writes not read back at their acknowledged "
                    "offset", lost)


def _observations(history: list[Json]) -> dict[tuple[int, int], set[str]]:
    seen: dict[tuple[int, int], set[str]] = defaultdict(set)
    for op in history:
        if op["type"] == "ok" and op["f"] in ("read", "final-read"):
            for p, offset, value in op["value"]["records"]:
                seen[(p, offset)].add(value)
    return seen


def check_duplicates(log: dict[int, dict[int, str]]) -> list[Violation]:
    where: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for p, offsets in log.items():
        for o, v in offsets.items():
            where[v].append((p, o))
    dups = [{"value": v, "at": sorted(at)} for v, at in where.items() if len(at) > 1]
    return _grouped("duplicate", "values at more than one offset", dups)


def check_offsets_single_valued(history: list[Json]) -> list[Violation]:
    first: dict[tuple[int, int], tuple[str, int]] = {}
    bad = []
    for op in history:
        if op["type"] != "ok" or op["f"] not in ("read", "final-read"):
            continue
        for p, offset, value in op["value"]["records"]:
            prev = first.setdefault((p, offset), (value, op["index"]))
            if prev[0] != value:
                bad.append({"partition": p, "offset": offset, "value": prev[0],
                            "read_in_op": prev[1], "then": value, "read_in_op_then": op["index"]})
    return _grouped("offset-two-values", "offsets read with two different values", bad)


def check_failed_writes_absent(ws: list[Write], log: dict[int, dict[int, str]]
                               ) -> list[Violation]:
    present = {v: (p, o) for p, offsets in log.items() for o, v in offsets.items()}
    bad = [{"op": w.done["index"], "value": w.value, "error": w.done["value"].get("error"),
            "found_at": present[w.value]}
           for w in ws if w.outcome == "fail" and w.value in present]
    return _grouped("failed-write-present", "writes that failed for certain are in the log", bad)


def check_read_order(history: list[Json]) -> list[Violation]:
    last: dict[tuple[str, int], tuple[int, int]] = {}  # (process, partition) -> (offset, op)
    bad = []
    for op in history:
        if op["type"] != "ok" or op["f"] != "read":
            continue
        for p, offset, _value in op["value"]["records"]:
            prev = last.get((op["process"], p))
            if prev is not None and offset != prev[0] + 1:
                bad.append({"process": op["process"], "partition": p, "after": prev[0],
                            "in_op": prev[1], "read": offset, "in_op_then": op["index"],
                            "what": "gap" if offset > prev[0] + 1 else "went back"})
            last[(op["process"], p)] = (offset, op["index"])
    return _grouped("read-order", "consumers read offsets out of order or with gaps", bad)


def check_writer_order(ws: list[Write], log: dict[int, dict[int, str]]) -> list[Violation]:
    at = {v: o for offsets in log.values() for o, v in offsets.items()}
    acked_max: dict[tuple[str, int], tuple[int, Write]] = {}
    bad = []
    for w in ws:  # in invoke order: a writer sends one record at a time
        o = at.get(w.value)
        if o is None:
            continue
        key = (w.process, w.partition)
        prev = acked_max.get(key)
        if prev is not None and o < prev[0]:
            bad.append({"process": w.process, "partition": w.partition,
                        "acked_first": prev[1].value, "at": prev[0],
                        "sent_later": w.value, "found_at": o})
        if w.outcome == "ok" and (prev is None or o > prev[0]):
            acked_max[key] = (o, w)
    return _grouped("writer-order", "a writer's later record sits before one acknowledged "
                    "earlier", bad)


def check_client_errors(history: list[Json]) -> list[Violation]:
    bad = [{"op": op["index"], "process": op["process"], "f": op["f"],
            "error": op["value"].get("error")}
           for op in history if op["type"] == "info" and op["value"].get("unexpected")]
    return _grouped("client-error", "clients met errors that are neither Kafka errors nor "
                    "timeouts", bad)


def check_replicas(partitions: list[Json]) -> list[Violation]:
    """``partitions``: [{"partition", "hw", "replicas", "isr",
    "logs": {broker: [[base, last, sha256], ...]},
    "kafka_python": {broker: {"crc_ok": bool, "agrees": bool}}}]."""
    diverged, isr_bad, parser_bad = [], [], []
    for part in partitions:
        p, hw = part["partition"], part["hw"]
        if sorted(part["isr"]) != sorted(part["replicas"]):
            isr_bad.append({"partition": p, "replicas": part["replicas"], "isr": part["isr"]})
        logs = {int(b): [tuple(x) for x in batches if x[1] < hw]
                for b, batches in part["logs"].items() if int(b) in part["isr"]}
        if logs:
            ref_broker = min(logs)
            ref = logs[ref_broker]
            for b, batches in sorted(logs.items()):
                if batches != ref:
                    diverged.append({"partition": p, "hw": hw, "brokers": [ref_broker, b],
                                     **_first_difference(ref, batches)})
        for b, kp in sorted(part.get("kafka_python", {}).items()):
            if not kp.get("crc_ok", True) or not kp.get("agrees", True):
                parser_bad.append({"partition": p, "broker": int(b), **kp})
    return (_grouped("replica-divergence", "in-sync replicas differ below the HW", diverged)
            + _grouped("isr-not-full", "replicas not back in the ISR after the heal", isr_bad)
            + _grouped("kafka-python-disagrees", "kafka-python reads a replica differently",
                       parser_bad))


def _first_difference(a: list[tuple[Any, ...]], b: list[tuple[Any, ...]]) -> dict[str, Any]:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return {"batch": i, "one": list(x), "other": list(y)}
    return {"batch": min(len(a), len(b)), "batches": [len(a), len(b)]}


# ---------------------------------------------------------------------------- availability

def stats(history: list[Json], ws: list[Write], session_timeout_s: float | None,
          lag_time_max_s: float | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"acked_all": 0, "acked_one": 0, "unknown": 0, "failed": 0,
                           "records_read": 0}
    for w in ws:
        if w.outcome == "ok":
            out["acked_all" if w.acks == "all" else "acked_one"] += 1
        elif w.outcome == "fail":
            out["failed"] += 1
        else:
            out["unknown"] += 1
    out["records_read"] = sum(len(op["value"]["records"]) for op in history
                              if op["type"] == "ok" and op["f"] == "read")
    gaps = unavailability(history, ws)
    out["unavailable_s_per_partition"] = gaps
    out["max_unavailable_s"] = max(gaps.values(), default=0.0)
    if session_timeout_s is not None:
        out["session_timeout_s"] = session_timeout_s
        bound = detection_bound(session_timeout_s, lag_time_max_s)
        out["detection_bound_s"] = bound
        out["availability"] = fault_availability(history, ws, bound)
        out["faults_past_bound"] = sum(1 for f in out["availability"] if f["exceeds"])
    return out


def detection_bound(session_timeout_s: float, lag_time_max_s: float | None) -> float:
    return round(session_timeout_s + (lag_time_max_s or 0.0) + ELECTION_SLACK_S, 3)


def fault_windows(history: list[Json]) -> list[Json]:
    """Each fault that started: {index, nemesis, target, result, from_s, to_s}. A fault ends
    at its stop; one never stopped (a kill that stays down) at the heal, or at the last
    operation; an admin operation (duration 0) is an instant."""
    started: dict[int, Json] = {}
    end_of_run = None
    for op in history:
        if op["process"] != "nemesis" or op["type"] != "ok":
            continue
        if op["f"] == "healed":
            end_of_run = op["time"]
            continue
        fault = op["value"].get("fault")
        if fault is None:
            continue
        if op["f"] == "start":
            started[fault["index"]] = {
                "index": fault["index"], "nemesis": fault["nemesis"],
                "target": fault["target"], "result": op["value"].get("result"),
                "from_s": op["time"], "to_s": op["time"] if not fault["duration_s"] else None}
        elif op["f"] == "stop" and fault["index"] in started:
            started[fault["index"]]["to_s"] = op["time"]
    if end_of_run is None:
        end_of_run = history[-1]["time"] if history else 0.0
    for w in started.values():
        if w["to_s"] is None:
            w["to_s"] = end_of_run
    return [started[i] for i in sorted(started)]


def fault_availability(history: list[Json], ws: list[Write], bound_s: float) -> list[Json]:
    """Per fault window, the longest gap between two acknowledged acks=all writes of one
    partition that overlaps the window, and whether it exceeds ``bound_s``."""
    acks: dict[int, list[float]] = defaultdict(list)
    for w in ws:
        if w.outcome == "ok" and w.acks == "all":
            acks[w.partition].append(w.done["time"])
    gaps = [(a, b, p) for p, times in acks.items()
            for a, b in itertools.pairwise(sorted(times))]
    out = []
    for win in fault_windows(history):
        over = [(b - a, p) for a, b, p in gaps if a <= win["to_s"] and b >= win["from_s"]]
        longest, partition = max(over, default=(0.0, None))
        out.append({**win, "longest_gap_s": round(longest, 3), "partition": partition,
                    "bound_s": bound_s, "exceeds": longest > bound_s})
    return out


def unavailability(history: list[Json], ws: list[Write]) -> dict[int, float]:
    """Per partition, the longest window without an acknowledged acks=all write, between the
    first and the last acknowledgement of the run (the workload writes every partition)."""
    acks: dict[int, list[float]] = defaultdict(list)
    for w in ws:
        if w.outcome == "ok" and w.acks == "all":
            acks[w.partition].append(w.done["time"])
    out = {}
    for p, times in sorted(acks.items()):
        times.sort()
        out[p] = round(max((b - a for a, b in itertools.pairwise(times)), default=0.0), 3)
    return out


# ---------------------------------------------------------------------------- ZooKeeper faults

def _fault_results(history: list[Json]) -> dict[tuple[int, str], Json]:
    """(fault index, ``start``/``stop``) -> the nemesis's result, for faults that ran."""
    out = {}
    for op in history:
        if op["process"] == "nemesis" and op["type"] == "ok" and op["f"] in ("start", "stop") \
                and "fault" in op["value"]:
            out[(op["value"]["fault"]["index"], op["f"])] = op["value"].get("result") or {}
    return out


def zookeeper_fault_bounds(history: list[Json], ws: list[Write], bound_s: float
                           ) -> list[Json]:
    """Per zk-leader-kill / zk-minority window: whether it is judged (no other fault overlaps
    it), the longest acks=all write gap after its start (of the gaps that began at most
    ELECTION_SLACK_S before it), and the controller epoch at its start and after its stop."""
    windows = fault_windows(history)
    results = _fault_results(history)
    acks: dict[int, list[float]] = defaultdict(list)
    for w in ws:
        if w.outcome == "ok" and w.acks == "all":
            acks[w.partition].append(w.done["time"])
    # The workload's last completion: a partition with no acknowledgement after the fault
    # until then was without acks=all writes all that time.
    end = max((w.done["time"] for w in ws if w.complete is not None), default=0.0)
    out = []
    for win in windows:
        if win["nemesis"] not in ZK_QUORUM_KEPT:
            continue
        others = [o["index"] for o in windows if o["index"] != win["index"]
                  and o["from_s"] <= win["to_s"] and o["to_s"] >= win["from_s"]]
        longest, partition = 0.0, None
        for p, times in acks.items():
            times = sorted(times)
            for a, b in [*itertools.pairwise(times), (times[-1], end)]:
                if a > win["to_s"] or b < win["from_s"] or a < win["from_s"] - ELECTION_SLACK_S:
                    continue
                if b - max(a, win["from_s"]) > longest:
                    longest, partition = b - max(a, win["from_s"]), p
        before = results.get((win["index"], "start"), {}).get("controller_epoch")
        after = results.get((win["index"], "stop"), {}).get("controller_epoch")
        live = results.get((win["index"], "start"), {}).get("controller_live")
        out.append({"index": win["index"], "nemesis": win["nemesis"], "target": win["target"],
                    "from_s": win["from_s"], "to_s": win["to_s"], "judged": not others,
                    "overlapped_by": others, "longest_gap_s": round(longest, 3),
                    "partition": partition, "bound_s": bound_s,
                    "controller_epoch": [before, after], "controller_live": live})
    return out


def check_zookeeper_faults(judged: list[Json]) -> list[Violation]:
    bad = []
    for f in judged:
        if not f["judged"]:
            continue
        before, after = f["controller_epoch"]
        if f["longest_gap_s"] > f["bound_s"]:
            bad.append({"fault": f["index"], "nemesis": f["nemesis"], "what": "write gap",
                        "longest_gap_s": f["longest_gap_s"], "partition": f["partition"],
                        "bound_s": f["bound_s"], "from_s": f["from_s"]})
        # No running controller held /controller when the fault began (one was killed and
        # its session had not expired yet): the election that followed was owed already.
        if before is not None and after is not None and before != after \
                and f.get("controller_live") is not False:
            bad.append({"fault": f["index"], "nemesis": f["nemesis"],
                        "what": "controller election", "controller_epoch": [before, after],
                        "from_s": f["from_s"]})
    return _grouped("zookeeper-fault-bound", "a ZooKeeper leader change or minority loss "
                    "cost a controller election or an acks=all write gap past the session "
                    "timeout", bad)
