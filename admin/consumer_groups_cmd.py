"""``replog consumer-groups`` - kafka-consumer-groups (Kafka's ConsumerGroupCommand) over the
group APIs of a Kafka listener (docs/groups.md); a first part of it:

    replog consumer-groups --bootstrap-server H:P --list [--state [S,...]]
    replog consumer-groups --bootstrap-server H:P --describe --group G [--group G2 | --all-groups]
    replog consumer-groups --bootstrap-server H:P --delete --group G [--group G2 | --all-groups]

``--bootstrap-server`` names a Kafka-protocol listener (cluster.json's
``kafka_bootstrap_servers``), as the Kafka tool's does. The output is Kafka's: ``--list`` one
group a line, or a GROUP/STATE table with ``--state``; ``--describe`` the offsets table (GROUP,
TOPIC, PARTITION, CURRENT-OFFSET, LOG-END-OFFSET, LAG, CONSUMER-ID, HOST, CLIENT-ID; "-" where a
partition has no member) with Kafka's column widths and its messages for an empty, rebalancing or
unknown group; ``--delete`` Kafka's "Deletion of requested consumer groups ('g') was
successful." or its per-group errors. Bad input is one line and exit status 1. Not yet:
``--reset-offsets``, ``--delete-offsets``, ``--describe --members/--state`` (docs/groups.md
"What remains").
"""

from __future__ import annotations

import socket
import struct

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

    def coordinator(self, group: str) -> _Connection:
        r = self.bootstrap.call(K.FIND_COORDINATOR, {"key_type": 0, "coordinator_keys": [group]})
        c = r["coordinators"][0]
        if c["error_code"]:
            raise ReplogError(f"no coordinator for group {group}: "
                              f"{ErrorCode(c['error_code']).name}")
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

    def log_end_offsets(self, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
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
                    {"name": t, "partitions": [{"partition_index": p, "timestamp": _LATEST,
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


# ---------------------------------------------------------------------------- the command

def run(args) -> int:
    import sys
    actions = [a for a in ("list", "describe", "delete") if getattr(args, a)]
    if len(actions) != 1:
        raise ReplogError("Command must include exactly one action: --list, --describe, "
                          "--delete")
    if args.state is not None and args.state:
        states = [s.strip() for s in args.state.split(",")]
        bad = [s for s in states if s.lower() not in {x.lower() for x in _STATES}]
        if bad:
            raise ReplogError(f"Invalid state list '{args.state}'. Valid states are: "
                              + ", ".join(_STATES))
    else:
        states = []
    if not args.list and not args.group and not args.all_groups:
        raise ReplogError(f"Option [{actions[0]}] takes one of these options: [all-groups], "
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
        for g in groups:
            out, err = describe(cluster, g)
            for line in err:
                print(line, file=sys.stderr)
            for line in out:
                print(line)
        return 0
    finally:
        cluster.close()


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
    p.add_argument("--group", action="append", default=[], help="a group (repeatable)")
    p.add_argument("--all-groups", action="store_true", help="every group")
    p.add_argument("--state", nargs="?", const="", default=None,
                   help="with --list: show the state column, and keep the groups in these "
                        "states (comma-separated)")
    p.set_defaults(func=run)
