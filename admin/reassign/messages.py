"""Kafka's ReassignPartitionsCommand messages and JSON, word for word (pure): what
``--generate``, ``--execute``, ``--verify``, ``--cancel`` and ``--list`` print.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence

from admin.reassign.parsing import ANY_LOG_DIR, TP, ids, names, plural, tp_name
from admin.reassign.planning import LogDirMove, ReassignmentState
from client import KafkaError
from client.admin_client import PartitionReassignment
from client.reassignment import (
    CANNOT_EXECUTE_BECAUSE_OF_EXISTING as CANNOT_EXECUTE_BECAUSE_OF_EXISTING,
)
from common.errors import ErrorCode

VERIFY_PERIODICALLY = ("Warning: You must run --verify periodically, until the reassignment "
                       "completes, to ensure the throttle is removed.")


def replica_name(tp: TP, broker: int) -> str:
    """Kafka's TopicPartitionReplica: ``<topic>-<partition>-<broker>``."""
    return f"{tp_name(tp)}-{broker}"


def log_dir_moves_message(done: Iterable[tuple[TP, int]]) -> str:
    done = sorted(done)
    return (f"Successfully started log directory move{plural(len(done))} for: "
            f"{','.join(replica_name(tp, b) for tp, b in done)}")


def reassignment_json(parts: Mapping[TP, Sequence[int]]) -> str:
    """Kafka's formatAsReassignmentJson: compact, partitions sorted by topic then number."""
    return json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": list(parts[(t, p)]),
         "log_dirs": [ANY_LOG_DIR] * len(parts[(t, p)])} for t, p in sorted(parts)]},
        separators=(",", ":"))


def generate_output(current: Mapping[TP, Sequence[int]],
                    proposed: Mapping[TP, Sequence[int]]) -> str:
    return (f"Current partition replica assignment\n{reassignment_json(current)}\n\n"
            f"Proposed partition reassignment configuration\n{reassignment_json(proposed)}\n")


def rollback_output(current: Mapping[TP, Sequence[int]]) -> str:
    """Kafka's currentPartitionReplicaAssignmentToString."""
    return (f"Current partition replica assignment\n\n{reassignment_json(current)}\n\n"
            f"Save this to use as the --reassignment-json-file option during rollback\n")


def started_message(parts: Iterable[TP]) -> str:
    parts = list(parts)
    return f"Successfully started partition reassignment{plural(len(parts))} for {names(parts)}"


def verify_lines(states: Mapping[TP, ReassignmentState],
                 progress: Mapping[TP, list[str]] | None = None) -> list[str]:
    """Kafka's partitionReassignmentStatesToString; ``progress``: lines to print under a
    partition still in progress (replog's addition)."""
    lines = ["Status of partition reassignment:"]
    for tp in sorted(states):
        s = states[tp]
        if not s.done:
            lines.append(f"Reassignment of partition {tp_name(tp)} is still in progress.")
            lines += (progress or {}).get(tp, [])
        elif s.current_replicas == s.target_replicas:
            lines.append(f"Reassignment of partition {tp_name(tp)} is completed.")
        else:
            lines.append(f"There is no active reassignment of partition {tp_name(tp)}, but "
                         f"replica set is {ids(s.current_replicas)} rather than "
                         f"{ids(s.target_replicas)}.")
    return lines


def progress_line(broker: int, leader: int, leo: int | KafkaError | None,
                  leader_leo: int | KafkaError | None, size: int | None,
                  leader_size: int | None) -> str:
    """One adding replica's catch-up: its log end offset and bytes against the leader's."""
    head = f"  Replica {broker}:"
    if leader < 0:
        return f"{head} no leader to copy from yet."
    if leo is None or isinstance(leo, KafkaError):
        why = "not created yet" if leo is None or \
            leo.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION else str(leo)
        return f"{head} {why} (leader {leader})."
    offsets = (f"log end offset {leo} of {leader_leo}" if isinstance(leader_leo, int)
               else f"log end offset {leo}")
    if size is None or leader_size is None:
        return f"{head} {offsets} (leader {leader})."
    pct = 100.0 if leader_size <= 0 else min(100.0, 100.0 * size / leader_size)
    return f"{head} {offsets}, {size} of {leader_size} bytes ({pct:.1f}%) (leader {leader})."


def list_lines(reassignments: Mapping[TP, PartitionReassignment]) -> list[str]:
    """Kafka's listReassignments."""
    if not reassignments:
        return ["No partition reassignments found."]
    return ["Current partition reassignments:"] + [
        f"{tp_name(tp)}: replicas: {ids(r.replicas)}. adding: {ids(r.adding_replicas)}. "
        f"removing: {ids(r.removing_replicas)}." for tp, r in sorted(reassignments.items())]


def log_dir_move_lines(states: Mapping[tuple[TP, int], LogDirMove]) -> list[str]:
    """Kafka's replicaMoveStatesToString."""
    lines = ["Status of replica reassignment:"]
    for (tp, b), s in sorted(states.items()):
        replica, part = replica_name(tp, b), tp_name(tp)
        if s.kind == "missing_dir":
            lines.append(f"Partition {part} is not found in any live log dir on broker {b}. "
                         f"There is likely an offline log directory on the broker.")
        elif s.kind == "missing":
            lines.append(f"Partition {part} cannot be found in any live log directory on "
                         f"broker {b}.")
        elif s.kind == "active" and s.future == s.target:
            lines.append(f"Reassignment of replica {replica} is still in progress.")
        elif s.kind == "active":
            lines.append(f"Partition {part} on broker {b} is being moved to log dir "
                         f"{s.future} instead of {s.target}.")
        elif s.kind == "cancelled":
            lines.append(f"Partition {part} on broker {b} is not being moved from log dir "
                         f"{s.current} to {s.target}.")
        else:
            lines.append(f"Reassignment of replica {replica} completed successfully.")
    return lines


def cancelled_moves_message(replicas: Iterable[tuple[TP, int]]) -> str:
    replicas = sorted(replicas)
    if not replicas:
        return "None of the specified partition moves are active."
    return (f"Successfully cancelled log directory move{plural(len(replicas))} for: "
            f"{','.join(replica_name(tp, b) for tp, b in replicas)}")


def cancelled_message(parts: Iterable[TP]) -> str:
    parts = list(parts)
    if not parts:
        return "None of the specified partition reassignments are active."
    return (f"Successfully cancelled partition reassignment{plural(len(parts))} for: "
            f"{names(parts)}")


def result_error_lines(results: Mapping[TP, KafkaError | None]) -> list[str]:
    """One line per refused partition: the partitions at fault first, then those the
    controller left alone because the request was refused whole (INVALID_REQUEST)."""
    failed = [(tp, e) for tp, e in results.items() if e is not None]
    failed.sort(key=lambda x: (x[1].error_code == ErrorCode.INVALID_REQUEST, x[0]))
    return [f"Error: {tp_name(tp)}: {e}" for tp, e in failed]
