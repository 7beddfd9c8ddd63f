"""``replog consumer-groups`` - kafka-consumer-groups (Kafka's ConsumerGroupCommand) over the
group APIs of a Kafka listener (docs/groups.md); a first part of it:

    replog consumer-groups --bootstrap-server H:P --list [--state [S,...]]
    replog consumer-groups --bootstrap-server H:P --describe --group G [--group G2 | --all-groups]
    replog consumer-groups --bootstrap-server H:P --delete --group G [--group G2 | --all-groups]
    replog consumer-groups --bootstrap-server H:P --reset-offsets --group G
        (--topic T[:P,...] | --all-topics)
        (--to-earliest | --to-latest | --to-offset N | --shift-by N) [--dry-run | --execute]

``--bootstrap-server`` names a Kafka-protocol listener (cluster.json's
``kafka_bootstrap_servers``), as the Kafka tool's does. The output is Kafka's: ``--list`` one
group a line, or a GROUP/STATE table with ``--state``; ``--describe`` the offsets table (GROUP,
TOPIC, PARTITION, CURRENT-OFFSET, LOG-END-OFFSET, LAG, CONSUMER-ID, HOST, CLIENT-ID; "-" where a
partition has no member) with Kafka's column widths and its messages for an empty, rebalancing or
unknown group; ``--delete`` Kafka's "Deletion of requested consumer groups ('g') was
successful." or its per-group errors; ``--reset-offsets`` Kafka's GROUP/TOPIC/PARTITION/NEW-OFFSET
table, a plan only unless ``--execute`` (committed then as the admin client's commit: no
generation), the offsets clamped to the log's start and end as Kafka's checkOffsetsRange does,
and refused on a group with members with Kafka's message. Bad input is one line and exit status
1. Not yet: ``--to-datetime``, ``--by-duration``, ``--from-file``, ``--delete-offsets``,
``--describe --members/--state`` (docs/groups.md "What remains").
"""

from __future__ import annotations

import socket
import struct
import time

from broker.group.consumer_protocol import decode_assignment
from common.errors import ErrorCode, ReplogError
from common.kafka_protocol.api import APIS
from common.kafka_protocol.api import ApiKey as K
from common.kafka_protocol.headers import (
    RequestHeader,
    read_response_header,
    write_request_header,
)
from common.kafka_protocol.primitives import Reader, Writer

MISSING = "-"  # ConsumerGroupCommand.MISSING_COLUMN_VALUE
_TIMEOUT_S = 30.0
_LATEST = -1  # ListOffsetsRequest.LATEST_TIMESTAMP
_EARLIEST = -2  # ListOffsetsRequest.EARLIEST_TIMESTAMP
_STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty")


class _Connection:
    """One Kafka-protocol connection; requests are answered in order."""

    def __init__(self, address: str):
        host, _, port = address.rpartition(":")
        try:
            self.sock = socket.create_connection((host, int(port)), timeout=_TIMEOUT_S)
        except (OSError, ValueError) as e:
            raise ReplogError(f"cannot connect to {address}: {e}") from None
        self.correlation = 0

    def call(self, api_key: int, body: dict, version: int | None = None) -> dict:
        api = APIS[api_key]
        version = api.served.hi if version is None else version
        self.correlation += 1
        w = Writer()
        write_request_header(w, RequestHeader(api_key, version, self.correlation,
                                              "replog-consumer-groups"))
        data = w.getvalue() + api.request.encode(body, version)
        self.sock.sendall(struct.pack(">i", len(data)) + data)
        size = struct.unpack(">i", self._exactly(4))[0]
        r = Reader(self._exactly(size))
        read_response_header(r, api_key, version)
        return api.response.decode(r, version).to_dict()

    def _exactly(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ReplogError("the broker closed the connection")
            buf += chunk
        return buf

    def close(self) -> None:
        self.sock.close()


_API_TIMEOUT_S = 60.0  # Kafka's default.api.timeout.ms
_RETRY_BACKOFF_S = 0.1  # retry.backoff.ms
_RETRIABLE_COORDINATOR = frozenset({ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                                    ErrorCode.NOT_COORDINATOR})


class _Cluster:
    def __init__(self, bootstrap: str):
        self.bootstrap = _Connection(bootstrap.split(",")[0].strip())
        self._conns: dict[int, _Connection] = {}
        md = self.bootstrap.call(K.METADATA, {"topics": None,
                                              "allow_auto_topic_creation": False})
        self.brokers = {b["node_id"]: f"{b['host']}:{b['port']}" for b in md["brokers"]}
        self.leaders = {(t["name"], p["partition_index"]): p["leader_id"]
                        for t in md["topics"] for p in t["partitions"]}

    def node(self, node_id: int) -> _Connection:
        if node_id not in self._conns:
            self._conns[node_id] = _Connection(self.brokers[node_id])
        return self._conns[node_id]

    def coordinator(self, group: str, timeout_s: float = _API_TIMEOUT_S) -> _Connection:
        """The group's coordinator. FindCoordinator's retriable answers are retried until
        ``timeout_s``, as Kafka's AdminClient does within default.api.timeout.ms: a fresh
        cluster answers COORDINATOR_NOT_AVAILABLE while the first FindCoordinator has
        __consumer_offsets created, and COORDINATOR_LOAD_IN_PROGRESS while it loads."""
        deadline = time.monotonic() + timeout_s
        while True:
            r = self.bootstrap.call(K.FIND_COORDINATOR,
                                    {"key_type": 0, "coordinator_keys": [group]})
            c = r["coordinators"][0]
            if not c["error_code"]:
                break
            if c["error_code"] not in _RETRIABLE_COORDINATOR or time.monotonic() >= deadline:
                raise ReplogError(f"no coordinator for group {group}: "
                                  f"{ErrorCode(c['error_code']).name}")
            time.sleep(_RETRY_BACKOFF_S)
        self.brokers.setdefault(c["node_id"], f"{c['host']}:{c['port']}")
        return self.node(c["node_id"])

    def list_groups(self, states: list[str]) -> list[dict]:
        out: dict[str, dict] = {}
        for node_id in sorted(self.brokers):
            r = self.node(node_id).call(K.LIST_GROUPS, {"states_filter": states,
                                                        "types_filter": []})
            for g in r["groups"]:
                out[g["group_id"]] = g
        return [out[g] for g in sorted(out)]

    def log_end_offsets(self, tps: list[tuple[str, int]], timestamp: int = _LATEST
                        ) -> dict[tuple[str, int], int]:
        by_leader: dict[int, list[tuple[str, int]]] = {}
        for tp in tps:
            if self.leaders.get(tp, -1) >= 0:
                by_leader.setdefault(self.leaders[tp], []).append(tp)
        out = {}
        for leader, parts in by_leader.items():
            topics: dict[str, list[int]] = {}
            for t, p in parts:
                topics.setdefault(t, []).append(p)
            r = self.node(leader).call(K.LIST_OFFSETS, {
                "replica_id": -1, "isolation_level": 0, "topics": [
                    {"name": t, "partitions": [{"partition_index": p, "timestamp": timestamp,
                                                "current_leader_epoch": -1}
                                               for p in ps]} for t, ps in topics.items()]})
            for t in r["topics"]:
                for p in t["partitions"]:
                    if p["error_code"] == 0:
                        out[(t["name"], p["partition_index"])] = p["offset"]
        return out

    def close(self) -> None:
        for c in (self.bootstrap, *self._conns.values()):
            c.close()


# ---------------------------------------------------------------------------- --list

def list_lines(groups: list[dict], with_state: bool) -> list[str]:
    if not with_state:
        return [g["group_id"] for g in groups]
    width = max([15, *(len(g["group_id"]) for g in groups)]) + 10  # printGroupInfo
    return [f"{'GROUP':<{width}} {'STATE':<20}"] + [
        f"{g['group_id']:<{width}} {g['group_state']:<20}" for g in groups]


# ---------------------------------------------------------------------------- --describe

def offsets_rows(group: str, described: dict, committed: dict[tuple[str, int], int],
                 ends: dict[tuple[str, int], int]) -> list[tuple[str, ...]]:
    """ConsumerGroupCommand.collectGroupsOffsets: each member's assigned partitions, the
    members with the most partitions first, then the committed partitions no member holds."""
    rows: list[tuple[str, ...]] = []
    assigned: set[tuple[str, int]] = set()
    members = []
    for m in described["members"]:
        parts = decode_assignment(m["member_assignment"]) or {}
        tps = sorted((t, p) for t, ps in parts.items() for p in ps)
        members.append((m, tps))
    members.sort(key=lambda mt: -len(mt[1]))
    for m, tps in members:
        if not tps:
            rows.append((group, MISSING, MISSING, MISSING, MISSING, MISSING,
                         m["member_id"], m["client_host"], m["client_id"]))
        for tp in tps:
            assigned.add(tp)
            rows.append(_row(group, tp, committed, ends, m["member_id"], m["client_host"],
                             m["client_id"]))
    for tp in sorted(set(committed) - assigned):
        rows.append(_row(group, tp, committed, ends, MISSING, MISSING, MISSING))
    return rows


def _row(group, tp, committed, ends, member, host, client) -> tuple[str, ...]:
    offset, end = committed.get(tp), ends.get(tp)
    lag = MISSING if offset is None or offset == -1 or end is None else str(end - offset)
    return (group, tp[0], str(tp[1]), MISSING if offset is None else str(offset),
            MISSING if end is None else str(end), lag, member, host, client)


def offsets_table(rows: list[tuple[str, ...]]) -> list[str]:
    """printOffsetFormat's columns: group, topic, consumer id and host at least 15 wide."""
    g = max([15, *(len(r[0]) for r in rows)])
    t = max([15, *(len(r[1]) for r in rows)])
    c = max([15, *(len(r[6]) for r in rows)])
    h = max([15, *(len(r[7]) for r in rows)])

    def line(r):
        return (f"{r[0]:<{g}} {r[1]:<{t}} {r[2]:<10} {r[3]:<15} {r[4]:<15} {r[5]:<15} "
                f"{r[6]:<{c}} {r[7]:<{h}} {r[8]}")
    header = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
              "CONSUMER-ID", "HOST", "CLIENT-ID")
    return ["", line(header)] + [line(r) for r in rows]


def describe(cluster: _Cluster, group: str) -> tuple[list[str], list[str]]:
    """(stdout lines, stderr lines) of one group's --describe."""
    conn = cluster.coordinator(group)
    d = conn.call(K.DESCRIBE_GROUPS, {"groups": [group],
                                      "include_authorized_operations": False})["groups"][0]
    if d["error_code"]:
        raise ReplogError(f"cannot describe group {group}: {ErrorCode(d['error_code']).name}")
    f = conn.call(K.OFFSET_FETCH, {"groups": [{"group_id": group, "topics": None}],
                                   "require_stable": False})["groups"][0]
    committed = {(t["name"], p["partition_index"]): p["committed_offset"]
                 for t in f["topics"] for p in t["partitions"]}
    state = d["group_state"]
    if state == "Dead" or (not committed and not d["members"]):
        return ["", f"Error: Consumer group '{group}' does not exist."], []
    rows = offsets_rows(group, d, committed, cluster.log_end_offsets(
        sorted({*committed, *((t, p) for m in d["members"] for t, ps in (
            decode_assignment(m["member_assignment"]) or {}).items() for p in ps)})))
    err = []
    if state == "Empty":
        err = ["", f"Consumer group '{group}' has no active members."]
    elif state in ("PreparingRebalance", "CompletingRebalance"):
        err = ["", f"Warning: Consumer group '{group}' is rebalancing."]
    return offsets_table(rows) + [""], err


# ---------------------------------------------------------------------------- --delete

def delete(cluster: _Cluster, groups: list[str]) -> list[str]:
    errors = {}
    for g in groups:
        r = cluster.coordinator(g).call(K.DELETE_GROUPS, {"groups_names": [g]})
        code = r["results"][0]["error_code"]
        if code:
            errors[g] = ErrorCode(code)
    ok = [g for g in groups if g not in errors]
    out = []
    if ok:  # ConsumerGroupCommand.deleteGroups' messages
        out.append("Deletion of requested consumer groups ("
                   + ", ".join(f"'{g}'" for g in ok) + ") was successful.")
    if errors:
        out.append("Deletion of some consumer groups failed:")
        out += [f"* Group '{g}' could not be deleted due to: {_exception(e)}"
                for g, e in errors.items()]
    return out


def _exception(e: ErrorCode) -> str:
    return {ErrorCode.NON_EMPTY_GROUP: "org.apache.kafka.common.errors.GroupNotEmptyException:"
            " The group is not empty.",
            ErrorCode.GROUP_ID_NOT_FOUND: "org.apache.kafka.common.errors."
            "GroupIdNotFoundException: The group id does not exist."}.get(e, e.name)


# ---------------------------------------------------------------------------- --reset-offsets

def _partitions(cluster: _Cluster, topics: list[str]) -> list[tuple[str, int]]:
    """GroupOffsetsResetter.parseTopicPartitionsToReset: t:p,p names partitions, t all."""
    out: list[tuple[str, int]] = []
    for arg in topics:
        if ":" in arg:
            parts = arg.split(":")
            if len(parts) != 2:
                raise ReplogError(f"Invalid topic arg '{arg}', expected topic name and "
                                  "partitions")
            for p in parts[1].split(","):
                try:
                    out.append((parts[0], int(p)))
                except ValueError:
                    raise ReplogError(f"Invalid partition '{p}' specified in topic arg "
                                      f"'{arg}''") from None
        else:
            known = sorted(p for t, p in cluster.leaders if t == arg)
            if not known:
                raise ReplogError(f"Topic '{arg}' does not exist")  # describeTopics' error
            out += [(arg, p) for p in known]
    return list(dict.fromkeys(out))


def reset_plan(cluster: _Cluster, group: str, args) -> tuple[dict[tuple[str, int], int] | None,
                                                            list[str]]:
    """(the new offsets, or None when refused; the lines printed before the table)."""
    conn = cluster.coordinator(group)
    d = conn.call(K.DESCRIBE_GROUPS, {"groups": [group],
                                      "include_authorized_operations": False})["groups"][0]
    state = d["group_state"] or "Dead"
    if state not in ("Empty", "Dead"):
        return None, ["", f"Error: Assignments can only be reset if the group '{group}' is "
                          f"inactive, but the current state is {state}."]
    f = conn.call(K.OFFSET_FETCH, {"groups": [{"group_id": group, "topics": None}],
                                   "require_stable": False})["groups"][0]
    committed = {(t["name"], p["partition_index"]): p["committed_offset"]
                 for t in f["topics"] for p in t["partitions"] if p["committed_offset"] >= 0}
    tps = sorted(committed) if args.all_topics else _partitions(cluster, args.topic)
    start = cluster.log_end_offsets(tps, _EARLIEST)
    end = cluster.log_end_offsets(tps)
    missing = [tp for tp in tps if tp not in start or tp not in end]
    if missing:
        t, p = missing[0]
        raise ReplogError(f"Error getting starting offset of topic partition: {t}-{p}")
    if args.to_earliest:
        wanted = {tp: start[tp] for tp in tps}
    elif args.to_latest:
        wanted = {tp: end[tp] for tp in tps}
    elif args.to_offset is not None:
        wanted = {tp: args.to_offset for tp in tps}
    else:  # --shift-by from the committed offset (the log end when none is committed)
        wanted = {tp: committed.get(tp, end[tp]) + args.shift_by for tp in tps}
    # checkOffsetsRange: within [log start, log end]
    return {tp: min(max(o, start[tp]), end[tp]) for tp, o in wanted.items()}, []


def reset_table(group: str, plan: dict[tuple[str, int], int]) -> list[str]:
    """GroupOffsetsResetter.printOffsetsToReset."""
    if not plan:
        return [""]
    g = max(15, len(group))
    t = max([15, *(len(tp[0]) for tp in plan)])
    lines = [""] + [f"{a:<{g}} {b:<{t}} {c:<10} {d}" for a, b, c, d in [
        ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"),
        *((group, tp[0], str(tp[1]), str(o)) for tp, o in sorted(plan.items()))]]
    return lines


def execute_reset(cluster: _Cluster, group: str, plan: dict[tuple[str, int], int]) -> None:
    topics: dict[str, list[dict]] = {}
    for (t, p), o in sorted(plan.items()):
        topics.setdefault(t, []).append({"partition_index": p, "committed_offset": o,
                                         "committed_leader_epoch": -1,
                                         "committed_metadata": ""})
    r = cluster.coordinator(group).call(K.OFFSET_COMMIT, {
        "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
        "group_instance_id": None,
        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]})
    failed = [(t["name"], p["partition_index"], p["error_code"]) for t in r["topics"]
              for p in t["partitions"] if p["error_code"]]
    if failed:
        t, p, code = failed[0]
        raise ReplogError(f"Error: Executing consumer group command failed due to "
                          f"{ErrorCode(code).name} committing {t}-{p}")


# ---------------------------------------------------------------------------- the command

def run(args) -> int:
    import sys
    actions = [a for a in ("list", "describe", "delete", "reset_offsets") if getattr(args, a)]
    if len(actions) != 1:
        raise ReplogError("Command must include exactly one action: --list, --describe, "
                          "--delete, --reset-offsets")
    if args.reset_offsets:
        _check_reset_options(args)
    if args.state is not None and args.state:
        states = [s.strip() for s in args.state.split(",")]
        bad = [s for s in states if s.lower() not in {x.lower() for x in _STATES}]
        if bad:
            raise ReplogError(f"Invalid state list '{args.state}'. Valid states are: "
                              + ", ".join(_STATES))
    else:
        states = []
    if not args.list and not args.group and not args.all_groups:
        action = actions[0].replace("_", "-")
        raise ReplogError(f"Option [{action}] takes one of these options: [all-groups], "
                          "[group]")
    cluster = _Cluster(args.bootstrap_server)
    try:
        if args.list:
            for line in list_lines(cluster.list_groups(states), args.state is not None):
                print(line)
            return 0
        groups = [g["group_id"] for g in cluster.list_groups([])] if args.all_groups \
            else list(dict.fromkeys(args.group))
        if args.delete:
            for line in delete(cluster, groups):
                print(line)
            return 0
        if args.reset_offsets:
            for g in groups:
                plan, lines = reset_plan(cluster, g, args)
                for line in lines:
                    print(line)
                if plan is None:
                    continue
                if args.execute:
                    execute_reset(cluster, g, plan)
                for line in reset_table(g, plan):
                    print(line)
            return 0
        for g in groups:
            out, err = describe(cluster, g)
            for line in err:
                print(line, file=sys.stderr)
            for line in out:
                print(line)
        return 0
    finally:
        cluster.close()


def _check_reset_options(args) -> None:
    modes = [m for m in ("to_earliest", "to_latest") if getattr(args, m)] + \
        [m for m in ("to_offset", "shift_by") if getattr(args, m) is not None]
    if len(modes) != 1:
        raise ReplogError("Option [reset-offsets] takes exactly one of these options: "
                          "[to-earliest], [to-latest], [to-offset], [shift-by]")
    if bool(args.topic) == bool(args.all_topics):
        raise ReplogError("Option [reset-offsets] takes one of these options: [all-topics], "
                          "[topic]")
    if args.execute and args.dry_run:
        raise ReplogError("Option [reset-offsets] takes at most one of these options: "
                          "[dry-run], [execute]")


def add_parsers(sub) -> None:
    p = sub.add_parser("consumer-groups",
                       help="list, describe and delete consumer groups (kafka-consumer-groups)")
    p.add_argument("--bootstrap-server", required=True,
                   help="a Kafka-protocol listener, host:port (cluster.json "
                        "kafka_bootstrap_servers)")
    p.add_argument("--list", action="store_true", help="list all consumer groups")
    p.add_argument("--describe", action="store_true",
                   help="describe the groups' offsets and lag")
    p.add_argument("--delete", action="store_true", help="delete the groups (Empty ones only)")
    p.add_argument("--reset-offsets", action="store_true",
                   help="reset the offsets of an inactive group (a plan unless --execute)")
    p.add_argument("--group", action="append", default=[], help="a group (repeatable)")
    p.add_argument("--topic", action="append", default=[],
                   help="with --reset-offsets: a topic, or topic:p,p (repeatable)")
    p.add_argument("--all-topics", action="store_true",
                   help="with --reset-offsets: every topic the group has offsets for")
    p.add_argument("--to-earliest", action="store_true", help="reset to the log start")
    p.add_argument("--to-latest", action="store_true", help="reset to the log end")
    p.add_argument("--to-offset", type=int, default=None, help="reset to this offset")
    p.add_argument("--shift-by", type=int, default=None,
                   help="move the committed offset by this many (negative: back)")
    p.add_argument("--dry-run", action="store_true", help="only show the plan (the default)")
    p.add_argument("--execute", action="store_true", help="commit the new offsets")
    p.add_argument("--all-groups", action="store_true", help="every group")
    p.add_argument("--state", nargs="?", const="", default=None,
                   help="with --list: show the state column, and keep the groups in these "
                        "states (comma-separated)")
    p.set_defaults(func=run)
