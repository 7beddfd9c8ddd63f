"""``replog consumer-groups`` - kafka-consumer-groups (Kafka's ConsumerGroupCommand) over the
group APIs of a Kafka listener (docs/groups.md):

    replog consumer-groups --bootstrap-server H:P --list [--state [S,...]]
    replog consumer-groups --bootstrap-server H:P --describe (--group G [--group G2] | --all-groups)
        [--offsets | --members [--verbose] | --state]
    replog consumer-groups --bootstrap-server H:P --delete (--group G [--group G2] | --all-groups)
    replog consumer-groups --bootstrap-server H:P --delete-offsets --group G --topic T[:P,...]
    replog consumer-groups --bootstrap-server H:P --reset-offsets (--group G | --all-groups)
        (--topic T[:P,...] | --all-topics)
        (--to-earliest | --to-latest | --to-current | --to-offset N | --shift-by N
         | --to-datetime DT | --by-duration PnDTnHnMnS | --from-file CSV)
        [--dry-run | --execute] [--export]

``--bootstrap-server`` names a Kafka-protocol listener (cluster.json's
``kafka_bootstrap_servers``), as the Kafka tool's does. The output is Kafka's: ``--list`` one
group a line, or a GROUP/STATE table with ``--state``; ``--describe`` (or ``--describe
--offsets``) the offsets table (GROUP, TOPIC, PARTITION, CURRENT-OFFSET, LOG-END-OFFSET, LAG,
CONSUMER-ID, HOST, CLIENT-ID; "-" where a partition has no member) with Kafka's column widths
and its messages for an empty, rebalancing or unknown group; ``--describe --members`` GROUP,
CONSUMER-ID, [GROUP-INSTANCE-ID,] HOST, CLIENT-ID, #PARTITIONS [, ASSIGNMENT with
``--verbose``]; ``--describe --state`` GROUP, COORDINATOR (ID), ASSIGNMENT-STRATEGY, STATE,
#MEMBERS; ``--delete`` Kafka's "Deletion of requested consumer groups ('g') was successful." or
its per-group errors; ``--delete-offsets`` Kafka's "Request succeed for deleting offsets ..." and
its TOPIC/PARTITION/STATUS table (OffsetDelete; GROUP_SUBSCRIBED_TO_TOPIC and the other errors
in Kafka's words, exit status 1 when any partition failed); ``--reset-offsets`` Kafka's
GROUP/TOPIC/PARTITION/NEW-OFFSET table, or with ``--export`` the plan as Kafka's CSV
(``topic,partition,offset`` for one group, ``group,topic,partition,offset`` for several, the
format ``--from-file`` reads back), a plan only unless ``--execute`` (committed then as the admin
client's commit: no generation), the offsets clamped to the log's start and end as Kafka's
checkOffsetsRange does, ``--to-datetime`` / ``--by-duration`` by ListOffsets for a timestamp
(the log end where no record is that recent, with Kafka's "Warn:" line), and refused on a group
with members with Kafka's message. Bad input is one line and exit status 1.
"""

from __future__ import annotations

import datetime
import re
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
        self.coordinators: dict[str, int] = {}  # group -> the node FindCoordinator named
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
        self.coordinators[group] = c["node_id"]
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


def _describe_group(cluster: _Cluster, group: str) -> tuple[_Connection, dict]:
    conn = cluster.coordinator(group)
    d = conn.call(K.DESCRIBE_GROUPS, {"groups": [group],
                                      "include_authorized_operations": False})["groups"][0]
    if d["error_code"]:
        raise ReplogError(f"cannot describe group {group}: {ErrorCode(d['error_code']).name}")
    return conn, d


def _state_messages(group: str, state: str) -> tuple[list[str], list[str]]:
    """ConsumerGroupService.shouldPrintMemberState's messages, (stdout, stderr)."""
    if state == "Empty":
        return [], ["", f"Consumer group '{group}' has no active members."]
    if state in ("PreparingRebalance", "CompletingRebalance"):
        return [], ["", f"Warning: Consumer group '{group}' is rebalancing."]
    return [], []


def describe(cluster: _Cluster, group: str) -> tuple[list[str], list[str]]:
    """(stdout lines, stderr lines) of one group's --describe [--offsets]."""
    conn, d = _describe_group(cluster, group)
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
    return offsets_table(rows) + [""], _state_messages(group, state)[1]


def members_table(group: str, described: dict, verbose: bool) -> list[str]:
    """ConsumerGroupService.printMembers: GROUP-INSTANCE-ID only when a member has one
    (KIP-345), ASSIGNMENT only with --verbose, as topic(p,p) per topic, topics sorted."""
    rows = []
    for m in described["members"]:
        parts = decode_assignment(m["member_assignment"]) or {}
        n = sum(len(ps) for ps in parts.values())
        assignment = ", ".join(sorted(f"{t}(" + ",".join(str(p) for p in sorted(ps)) + ")"
                                      for t, ps in parts.items() if ps)) or MISSING
        rows.append((group, m["member_id"], m.get("group_instance_id") or "",
                     m["client_host"], m["client_id"], str(n), assignment))
    with_instance = any(r[2] for r in rows)
    widths = [max([w, *(len(r[i]) for r in rows)]) for i, w in
              enumerate((15, 15, 17, 15, 15))]
    cols = (0, 1, 2, 3, 4) if with_instance else (0, 1, 3, 4)

    def line(r):
        text = " ".join(f"{r[i]:<{widths[i]}}" for i in cols) + f" {r[5]:<15} "
        return text + r[6] if verbose else text
    header = ("GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS",
              "ASSIGNMENT")
    return ["", line(header)] + [line(r) for r in rows]


def describe_members(cluster: _Cluster, group: str, verbose: bool
                     ) -> tuple[list[str], list[str]]:
    _, d = _describe_group(cluster, group)
    if d["group_state"] == "Dead":
        return ["", f"Error: Consumer group '{group}' does not exist."], []
    return members_table(group, d, verbose) + [""], _state_messages(group, d["group_state"])[1]


def state_table(group: str, coordinator: str, described: dict) -> list[str]:
    """ConsumerGroupService.printStates: the first column is as wide as the coordinator's
    (at least 25), as Kafka's format has it."""
    width = max(25, len(coordinator))
    fmt = f"{{:<{width}}} {{:<25}} {{:<20}} {{:<15}} {{}}"
    return ["", fmt.format("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE",
                           "#MEMBERS"),
            fmt.format(group, coordinator, described["protocol_data"] or "",
                       described["group_state"], len(described["members"]))]


def describe_state(cluster: _Cluster, group: str) -> tuple[list[str], list[str]]:
    _, d = _describe_group(cluster, group)
    if d["group_state"] == "Dead":
        return ["", f"Error: Consumer group '{group}' does not exist."], []
    node = cluster.coordinators[group]
    coordinator = f"{cluster.brokers[node]}  ({node})"
    return state_table(group, coordinator, d) + [""], \
        _state_messages(group, d["group_state"])[1]


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


_EXCEPTIONS = {  # org.apache.kafka.common.protocol.Errors: the exception and its message
    ErrorCode.NON_EMPTY_GROUP: ("GroupNotEmptyException", "The group is not empty."),
    ErrorCode.GROUP_ID_NOT_FOUND: ("GroupIdNotFoundException", "The group id does not exist."),
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ("UnknownTopicOrPartitionException",
                                           "This server does not host this topic-partition."),
    ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC: (
        "GroupSubscribedToTopicException", "Deleting offsets of a topic is forbidden while the "
        "consumer group is actively subscribed to it."),
}


def _exception(e: ErrorCode) -> str:
    if e in _EXCEPTIONS:
        name, message = _EXCEPTIONS[e]
        return f"org.apache.kafka.common.errors.{name}: {message}"
    return e.name


# ---------------------------------------------------------------------------- --delete-offsets

def delete_offsets(cluster: _Cluster, group: str, topics: list[str]) -> tuple[list[str], bool]:
    """ConsumerGroupService.deleteOffsets: (the lines, whether everything was deleted). A topic
    named without partitions means all of its partitions; one that does not exist is a "Not
    Provided" row with UNKNOWN_TOPIC_OR_PARTITION and is not sent."""
    results: dict[tuple[str, int], ErrorCode | None] = {}
    wanted: list[tuple[str, int]] = []
    for arg in topics:
        if ":" in arg:
            wanted += _partitions(cluster, [arg])
        else:
            known = sorted(p for t, p in cluster.leaders if t == arg)
            if known:
                wanted += [(arg, p) for p in known]
            else:
                results[(arg, -1)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    wanted = list(dict.fromkeys(wanted))
    top = ErrorCode.NONE
    if wanted:
        by_topic: dict[str, list[int]] = {}
        for t, p in wanted:
            by_topic.setdefault(t, []).append(p)
        r = cluster.coordinator(group).call(K.OFFSET_DELETE, {"group_id": group, "topics": [
            {"name": t, "partitions": [{"partition_index": p} for p in ps]}
            for t, ps in by_topic.items()]})
        top = ErrorCode(r["error_code"])
        got = {(t["name"], p["partition_index"]): ErrorCode(p["error_code"])
               for t in r["topics"] for p in t["partitions"]}
        for tp in wanted:
            # a top-level error fails every partition (the admin client's
            # DeleteConsumerGroupOffsetsHandler); else the first partition error is the
            # whole request's, as all() reports it
            code = top if top else got.get(tp, ErrorCode.NONE)
            results[tp] = code or None
        if not top:
            top = next((c for c in results.values() if c), ErrorCode.NONE)
    elif results:
        top = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    head = {
        ErrorCode.NONE: f"Request succeed for deleting offsets with topic {', '.join(topics)} "
                        f"group {group}",
        ErrorCode.INVALID_GROUP_ID: f"\nError: '{group}' is not valid.",
        ErrorCode.GROUP_ID_NOT_FOUND: f"\nError: '{group}' does not exist.",
        ErrorCode.GROUP_AUTHORIZATION_FAILED: f"\nError: Access to '{group}' is not authorized.",
        ErrorCode.NON_EMPTY_GROUP: f"\nError: Deleting offsets of a consumer group '{group}' is "
                                   "forbidden if the group is not empty.",
    }
    partition_level = (ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                       ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if top in head:
        first = head[top]
    elif top in partition_level:
        first = "\nError: Encounter some partition level error, see the follow-up details:"
    else:
        first = f"\nError: Encounter some unknown error: {top.name}"
    lines = first.split("\n") + [""]
    fmt = "{:<30} {:<15} {:<15}"
    lines.append(fmt.format("TOPIC", "PARTITION", "STATUS"))
    for (t, p), code in sorted(results.items(), key=lambda kv: kv[0][0] + str(kv[0][1])):
        lines.append(fmt.format(t, p if p >= 0 else "Not Provided",
                                f"Error: :{_exception(code)}" if code else "Successful"))
    return lines, top == ErrorCode.NONE


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


_DATETIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{3})"
                       r"(Z|[+-]\d{2}(?::?\d{2})?)?")


def parse_datetime(text: str) -> int:
    """Utils.getDateTime: yyyy-MM-dd'T'HH:mm:ss.SSS with an optional zone (Z, +hh, +hhmm,
    +hh:mm), UTC when none is given; epoch milliseconds."""
    if "T" not in text:
        raise ReplogError("Executing consumer group command failed due to Error parsing "
                          "timestamp. It does not contain a 'T' according to ISO8601 format")
    m = _DATETIME.fullmatch(text)
    try:
        if not m:
            raise ValueError
        y, mo, d, h, mi, sec, ms, zone = m.groups()
        tz = datetime.timezone.utc
        if zone and zone != "Z":
            digits = zone[1:].replace(":", "")
            offset = datetime.timedelta(hours=int(digits[:2]), minutes=int(digits[2:] or 0))
            tz = datetime.timezone(offset if zone[0] == "+" else -offset)
        when = datetime.datetime(int(y), int(mo), int(d), int(h), int(mi), int(sec),
                                 int(ms) * 1000, tzinfo=tz)
    except ValueError:  # SimpleDateFormat's strict (non-lenient) parse
        raise ReplogError(f'Executing consumer group command failed due to Unparseable date: '
                          f'"{text}"') from None
    return int(when.timestamp() * 1000)


_DURATION = re.compile(r"([-+]?)P(?:([-+]?\d+)D)?(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?"
                       r"(?:([-+]?\d+)(?:[.,](\d{0,9}))?S)?)?", re.IGNORECASE)


def parse_duration_ms(text: str) -> int:
    """java.time.Duration.parse's PnDTnHnMnS (a T with nothing after it, or nothing at all after
    P, is refused as Java refuses it); milliseconds."""
    m = _DURATION.fullmatch(text)
    if not m or text.upper().endswith("T") or not any(m.group(i) for i in range(2, 6)):
        raise ReplogError(f"Executing consumer group command failed due to Text cannot be "
                          f"parsed to a Duration: {text}")
    sign, d, h, mi, sec, frac = m.groups()
    seconds = (int(d or 0) * 86400 + int(h or 0) * 3600 + int(mi or 0) * 60 + int(sec or 0))
    ms = seconds * 1000
    if frac:
        ms += (-1 if (sec or "").startswith("-") else 1) * int(frac.ljust(3, "0")[:3])
    return -ms if sign == "-" else ms


def parse_reset_plan(text: str, groups: list[str], name: str
                     ) -> dict[str, dict[tuple[str, int], int]]:
    """ConsumerGroupService.parseResetPlan: topic,partition,offset lines when one group is named
    (what --export writes for one group), else group,topic,partition,offset."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    single = len(groups) == 1 and bool(lines) and len(lines[0].split(",")) == 3
    plan: dict[str, dict[tuple[str, int], int]] = {}
    for n, line in enumerate(lines, 1):
        fields = line.split(",")
        try:
            if single:
                group, (t, p, o) = groups[0], fields
            else:
                group, t, p, o = fields
            plan.setdefault(group, {})[(t, int(p))] = int(o)
        except ValueError:
            form = "topic,partition,offset" if single else "group,topic,partition,offset"
            raise ReplogError(f"Invalid reset plan line {n} of {name}: '{line}' (expected "
                              f"{form})") from None
    return plan


def export_csv(plans: dict[str, dict[tuple[str, int], int]], single: bool) -> str:
    """ConsumerGroupService.exportOffsetsToCsv (Jackson's CSV: one record a line)."""
    return "".join((f"{t},{p},{o}\n" if single else f"{g},{t},{p},{o}\n")
                   for g, plan in plans.items() for (t, p), o in sorted(plan.items()))


def reset_plan(cluster: _Cluster, group: str, args,
               from_file: dict[str, dict[tuple[str, int], int]] | None = None
               ) -> tuple[dict[tuple[str, int], int] | None, list[str]]:
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
    before: list[str] = []
    if from_file is not None:
        if group not in from_file:
            return {}, ["", f"Error: No reset plan for group {group} found"]
        tps = sorted(from_file[group])
    elif args.all_topics:
        tps = sorted(committed)
    else:
        tps = _partitions(cluster, args.topic)
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
    elif args.to_current:  # the committed offset; the log end where none is committed
        wanted = {tp: committed.get(tp, end[tp]) for tp in tps}
    elif args.to_offset is not None:
        wanted = {tp: args.to_offset for tp in tps}
    elif args.shift_by is not None:
        unknown = [tp for tp in tps if tp not in committed]
        if unknown:
            raise ReplogError(f"Cannot shift offset for partition {unknown[0][0]}-"
                              f"{unknown[0][1]} since there is no current committed offset")
        wanted = {tp: committed[tp] + args.shift_by for tp in tps}
    elif from_file is not None:
        wanted = dict(from_file[group])
    else:  # --to-datetime / --by-duration: ListOffsets for the timestamp
        ts = parse_datetime(args.to_datetime) if args.to_datetime is not None else \
            int(time.time() * 1000) - parse_duration_ms(args.by_duration)
        found = cluster.log_end_offsets(tps, ts)
        wanted = {}
        for tp in tps:
            if tp not in found:
                raise ReplogError(f"Error getting offset by timestamp of topic partition: "
                                  f"{tp[0]}-{tp[1]}")
            if found[tp] < 0:  # ListOffsetsResponse.UNKNOWN_OFFSET: no record that recent
                before += ["", f"Warn: Partition {tp[1]} from topic {tp[0]} is empty. Falling "
                               "back to latest known offset."]
                wanted[tp] = end[tp]
            else:
                wanted[tp] = found[tp]
    # checkOffsetsRange: within [log start, log end]
    return {tp: min(max(o, start[tp]), end[tp]) for tp, o in wanted.items()}, before


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
        raise ReplogError(f"Executing consumer group command failed due to "
                          f"{ErrorCode(code).name} committing {t}-{p}")


# ---------------------------------------------------------------------------- the command

_RESET_MODES = ("to_earliest", "to_latest", "to_current", "to_offset", "shift_by",
                "to_datetime", "by_duration", "from_file")


def run(args) -> int:
    import sys
    actions = [a for a in ("list", "describe", "delete", "reset_offsets", "delete_offsets")
               if getattr(args, a)]
    if len(actions) != 1:
        raise ReplogError("Command must include exactly one action: --list, --describe, "
                          "--delete, --reset-offsets, --delete-offsets")
    _check_options(args)
    if args.state and not args.describe:
        states = [s.strip() for s in args.state.split(",")]
        bad = [s for s in states if s.lower() not in {x.lower() for x in _STATES}]
        if bad:
            raise ReplogError(f"Invalid state list '{args.state}'. Valid states are: "
                              + ", ".join(_STATES))
    else:
        states = []
    from_file = None
    if args.reset_offsets and args.from_file is not None:
        try:
            with open(args.from_file) as fh:
                text = fh.read()
        except OSError as e:
            raise ReplogError(f"cannot read {args.from_file}: {e.strerror}") from None
        from_file = parse_reset_plan(text, list(dict.fromkeys(args.group)), args.from_file)
    if args.reset_offsets and args.to_datetime is not None:
        parse_datetime(args.to_datetime)  # bad input is refused before anything is asked
    if args.reset_offsets and args.by_duration is not None:
        parse_duration_ms(args.by_duration)
    cluster = _Cluster(args.bootstrap_server)
    try:
        if args.list:
            for line in list_lines(cluster.list_groups(states), args.state is not None):
                print(line)
            return 0
        if args.delete_offsets:
            lines, ok = delete_offsets(cluster, args.group[0], list(dict.fromkeys(args.topic)))
            for line in lines:
                print(line)
            return 0 if ok else 1
        groups = [g["group_id"] for g in cluster.list_groups([])] if args.all_groups \
            else list(dict.fromkeys(args.group))
        if args.delete:
            for line in delete(cluster, groups):
                print(line)
            return 0
        if args.reset_offsets:
            return _reset(cluster, groups, args, from_file)
        missing = False  # a group that does not exist: its Error line, then status 1
        for g in groups:
            if args.members:
                out, err = describe_members(cluster, g, args.verbose)
            elif args.state is not None:
                out, err = describe_state(cluster, g)
            else:
                out, err = describe(cluster, g)
            for line in err:
                print(line, file=sys.stderr)
            for line in out:
                print(line)
            missing = missing or any(line.startswith("Error: ") for line in out)
        return 1 if missing else 0
    finally:
        cluster.close()


def _reset(cluster: _Cluster, groups: list[str], args, from_file) -> int:
    import sys
    plans: dict[str, dict[tuple[str, int], int]] = {}
    refused = False
    for g in groups:
        plan, lines = reset_plan(cluster, g, args, from_file)
        for line in lines:
            print(line)
        if plan is None:
            refused = True
            continue
        if args.execute and plan:
            execute_reset(cluster, g, plan)
        plans[g] = plan
    if not args.dry_run and not args.execute:
        # ConsumerGroupCommandOptions.checkArgs' warning, given here once there is a plan so
        # that bad input stays one line
        print("WARN: No action will be performed as the --execute option is missing.",
              file=sys.stderr)
    if args.export:
        print(export_csv(plans, len(args.group) == 1))
    else:
        for g, plan in plans.items():
            for line in reset_table(g, plan):
                print(line)
    return 1 if refused else 0


def _check_options(args) -> None:
    """ConsumerGroupCommandOptions.checkArgs, in Kafka's words."""
    scope = "Option [{}] takes one of these options: [all-groups], [group]"
    if args.describe:
        if not args.group and not args.all_groups:
            raise ReplogError(scope.format("describe"))
        if sum((args.members, args.offsets, args.state is not None)) > 1:
            raise ReplogError("Option [describe] takes at most one of these options: "
                              "[members], [offsets], [state]")
        if args.state:
            raise ReplogError("Option [describe] does not take a value for [state]")
    elif args.members or args.offsets or args.verbose:
        raise ReplogError("Option [members], [offsets] and [verbose] can only be used with "
                          "[describe]")
    if args.verbose and not args.members:
        raise ReplogError("Option [verbose] can only be used with [describe] [members]")
    if args.delete:
        if not args.group and not args.all_groups:
            raise ReplogError(scope.format("delete"))
        if args.topic:
            raise ReplogError("The consumer does not support topic-specific offset deletion "
                              "from a consumer group.")
    if args.delete_offsets:
        if not args.group or not args.topic:
            raise ReplogError("Option [delete-offsets] takes the following options: [group], "
                              "[topic]")
        if len(set(args.group)) > 1 or args.all_groups:
            raise ReplogError("Option [delete-offsets] takes one group: "
                              "Supports one consumer group at the time")
    if args.reset_offsets:
        _check_reset_options(args)
    elif args.export or args.dry_run or args.execute or args.all_topics or any(
            getattr(args, m) not in (None, False) for m in _RESET_MODES):
        raise ReplogError("Options [all-topics], [to-*], [shift-by], [by-duration], "
                          "[from-file], [dry-run], [execute] and [export] can only be used "
                          "with [reset-offsets]")
    if args.list and (args.group or args.all_groups):
        raise ReplogError("Option [group] and [all-groups] cannot be used with [list]")
    if args.group and args.all_groups:
        raise ReplogError("Option [group] cannot be used with option(s) [all-groups]")


def _check_reset_options(args) -> None:
    modes = [m for m in _RESET_MODES if getattr(args, m) not in (None, False)]
    if len(modes) != 1:
        raise ReplogError("Option [reset-offsets] takes exactly one of these options: "
                          "[to-earliest], [to-latest], [to-current], [to-offset], "
                          "[shift-by], [to-datetime], [by-duration], [from-file]")
    if not args.group and not args.all_groups:
        raise ReplogError("Option [reset-offsets] takes one of these options: [all-groups], "
                          "[group]")
    if args.from_file is None and bool(args.topic) == bool(args.all_topics):
        raise ReplogError("Option [reset-offsets] takes one of these options: [all-topics], "
                          "[topic]")
    if args.execute and args.dry_run:
        raise ReplogError("Option [reset-offsets] only accepts one of [execute] and [dry-run]")


def add_parsers(sub) -> None:
    p = sub.add_parser("consumer-groups",
                       help="list, describe and delete consumer groups (kafka-consumer-groups)")
    p.add_argument("--bootstrap-server", required=True,
                   help="a Kafka-protocol listener, host:port (cluster.json "
                        "kafka_bootstrap_servers)")
    p.add_argument("--list", action="store_true", help="list all consumer groups")
    p.add_argument("--describe", action="store_true",
                   help="describe the groups' offsets and lag (or --members, --state)")
    p.add_argument("--delete", action="store_true", help="delete the groups (Empty ones only)")
    p.add_argument("--delete-offsets", action="store_true",
                   help="delete a group's offsets of --topic (OffsetDelete; one group)")
    p.add_argument("--reset-offsets", action="store_true",
                   help="reset the offsets of an inactive group (a plan unless --execute)")
    p.add_argument("--group", action="append", default=[], help="a group (repeatable)")
    p.add_argument("--topic", action="append", default=[],
                   help="with --reset-offsets or --delete-offsets: a topic, or topic:p,p "
                        "(repeatable)")
    p.add_argument("--all-topics", action="store_true",
                   help="with --reset-offsets: every topic the group has offsets for")
    p.add_argument("--to-earliest", action="store_true", help="reset to the log start")
    p.add_argument("--to-latest", action="store_true", help="reset to the log end")
    p.add_argument("--to-current", action="store_true",
                   help="reset to the committed offset (the log end where there is none)")
    p.add_argument("--to-offset", type=int, default=None, help="reset to this offset")
    p.add_argument("--shift-by", type=int, default=None,
                   help="move the committed offset by this many (negative: back)")
    p.add_argument("--to-datetime", default=None,
                   help="reset to the first offset at or after this time, "
                        "'YYYY-MM-DDTHH:mm:SS.sss[Z|+hh:mm]' (UTC without a zone)")
    p.add_argument("--by-duration", default=None,
                   help="reset to the first offset at or after now minus 'PnDTnHnMnS'")
    p.add_argument("--from-file", default=None,
                   help="reset to the offsets of a CSV file (topic,partition,offset lines, or "
                        "group,topic,partition,offset; what --export writes)")
    p.add_argument("--export", action="store_true",
                   help="with --reset-offsets: print the plan as CSV instead of the table")
    p.add_argument("--dry-run", action="store_true", help="only show the plan (the default)")
    p.add_argument("--execute", action="store_true", help="commit the new offsets")
    p.add_argument("--all-groups", action="store_true", help="every group")
    p.add_argument("--members", action="store_true",
                   help="with --describe: the members and their partition counts")
    p.add_argument("--verbose", action="store_true",
                   help="with --describe --members: each member's assignment too")
    p.add_argument("--offsets", action="store_true",
                   help="with --describe: the offsets table (the default)")
    p.add_argument("--state", nargs="?", const="", default=None,
                   help="with --list: show the state column, and keep the groups in these "
                        "states (comma-separated); with --describe: the group's state")
    p.set_defaults(func=run)
