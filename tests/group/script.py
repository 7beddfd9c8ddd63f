"""Scenario scripts for the group coordinator core (tests/group/testdata/*.txt), in the format
of tests/controller/script.py (etcd-raft's datadriven tests):

    command arg key=value ...
    ----
    expected output lines

Blocks are separated by blank lines; a block's leading ``#`` lines say why the step is there.
REWRITE=1 regenerates the expected output (then review the diff: that review is the test).

The runner is the shell: every command becomes one event stepped into
``broker.group.core.GroupCoordinatorCore``, and every effect is printed in order and carried
out. Appends go to a stand-in log per __consumer_offsets partition (the records' real bytes,
encoded and decoded by broker/group/records.py), so `resign` and `lead` reload a partition
from what was written; they complete at once (the HW passes them) unless `appends hold` keeps
them for `complete`. After every command the core's invariants (tests/group/invariants.py) are
checked, and the runner checks that every member metadata and assignment reaches its reader
byte for byte ("MISMATCH" otherwise).

Member ids are ``CLIENT-N`` (or ``INSTANCE-N``), N counting the ids the core made. Requests
are numbered: an answer line is ``rN VERB WHO: ERROR ...``.

Commands:
    config PROP=V ...       the core's settings, by Kafka's names (a new core; first command)
    lead P [epoch=E] [hold] this broker leads __consumer_offsets-P: it loads the partition
                            from the stand-in log (`hold`: the load completes at `loaded P`)
    loaded P                the held load completes
    resign P [epoch=E]      another broker leads it now
    advance MS              the clock moves on; due timers fire (one Tick)
    appends hold|auto       appends wait for `complete` | complete at once (the default)
    complete [N|all] [error=NAME]   the oldest N held appends (default 1) complete
    join G CLIENT [member=M] [instance=I] [v=N] [session=MS] [rebalance=MS]
         [protocols=range,roundrobin] [topics=t,u] [owned=t-0,t-1] [type=consumer]
                            JoinGroup (v defaults to 9; protocols' metadata: a consumer
                            subscription of `topics`, owned partitions for cooperative-sticky)
    sync G MEMBER gen=N [assign=M:t-0,t-1;M2:t-2] [instance=I]
    heartbeat G MEMBER gen=N [instance=I]
    leave G MEMBER,... | leave G instance=I
    commit G [member=M gen=N] [instance=I] T-P=OFFSET[:META] ... [retention=MS] [v=N]
    fetch G[,G2] [T-P ...] [stable]
    list [states=S,S]       ListGroups
    describe G ...          DescribeGroups
    delete G ...            DeleteGroups
    offset-delete G T-P ... OffsetDelete
    show [G]                the groups' states, members, offsets and timers
    log P                   the stand-in log of partition P, decoded
"""

from __future__ import annotations

from pathlib import Path

from broker.group import consumer_protocol as cp
from broker.group import effects as X
from broker.group import events as E
from broker.group.config import GroupConfig
from broker.group.core import GroupCoordinatorCore
from broker.group.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_record,
)
from common.errors import ErrorCode
from common.names import TopicPartition
from tests import datadriven
from tests.group.invariants import violations

_CONFIG_DEFAULTS = {"offsets.topic.num.partitions": 1}


def _tp(text: str) -> TopicPartition:
    t, _, p = text.rpartition("-")
    return TopicPartition(t, int(p))


def _parts(text: str) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for tp in (_tp(x) for x in text.split(",") if x):
        out.setdefault(tp.topic, []).append(tp.partition)
    return out


def _fmt_parts(parts: dict[str, list[int]] | None) -> str:
    if parts is None:
        return "(unreadable)"
    return ",".join(f"{t}-{p}" for t, ps in sorted(parts.items()) for p in sorted(ps)) or "-"


def _subscription_text(meta: bytes) -> str:
    sub = cp.decode_subscription(meta)
    if sub is None:
        return f"raw:{meta.hex()}"
    topics, owned = sub
    return ",".join(topics) + (f" owned={_fmt_parts(owned)}" if owned else "")


class Scenario:
    def __init__(self) -> None:
        self.now = 0
        self.rid = 0
        self.ids = 0
        self.hold = False
        self.held: list[X.Append] = []
        self.logs: dict[int, list[E.LogRecord]] = {}
        self.labels: dict[int, str] = {}
        self.sent_meta: dict[tuple[str, str], bytes] = {}   # (group, client-or-member) -> bytes
        self.sent_assign: dict[tuple[str, str], bytes] = {}  # (group, member) -> bytes
        self.held_loads: dict[int, int] = {}
        self.out: list[str] = []
        self._new_core({})

    def _suffix(self) -> str:
        self.ids += 1
        return str(self.ids)

    def _new_core(self, props: dict[str, str]) -> None:
        self.config = GroupConfig.from_config({**_CONFIG_DEFAULTS, **props})
        self.core = GroupCoordinatorCore(self.config, now_ms=self.now,
                                         member_id_suffix=self._suffix)

    # ------------------------------------------------------------------ stepping

    def step(self, ev: E.Event) -> None:
        for eff in self.core.step(ev):
            self.carry_out(eff)

    def request(self, label: str, ev: E.Request) -> None:
        self.labels[ev.request_id] = label
        self.step(ev)

    def next_rid(self) -> int:
        self.rid += 1
        return self.rid

    def carry_out(self, eff: X.Effect) -> None:
        if isinstance(eff, X.Answer):
            self.out.append(f"r{eff.request_id} {self.labels.pop(eff.request_id)}: "
                            + self.answer_text(eff.response))
        elif isinstance(eff, X.Append):
            self.out.append(f"append #{eff.append_id} p{eff.partition}: "
                            + "; ".join(self.record_text(r.key, r.value) for r in eff.records))
            if self.hold:
                self.held.append(eff)
            else:
                self.complete(eff, ErrorCode.NONE)
        elif isinstance(eff, X.LoadPartition):
            if eff.partition in self.held_loads:
                self.held_loads[eff.partition] = eff.epoch
                self.out.append(f"load p{eff.partition} epoch={eff.epoch} (held)")
                return
            self.load(eff.partition, eff.epoch)
        elif isinstance(eff, X.Emit):
            fields = " ".join(f"{k}={v}" for k, v in eff.fields.items())
            self.out.append(f"event {eff.name} {fields}")

    def load(self, partition: int, epoch: int) -> None:
        records = tuple(self.logs.get(partition, []))
        self.out.append(f"load p{partition} epoch={epoch}: {len(records)} records")
        self.step(E.LoadRecords(partition, epoch, records, now_ms=self.now))
        self.step(E.LoadCompleted(partition, epoch, now_ms=self.now))

    def complete(self, eff: X.Append, error: ErrorCode) -> None:
        log = self.logs.setdefault(eff.partition, [])
        base = len(log)
        if error is ErrorCode.NONE:
            for r in eff.records:
                k, v = r.encode()
                log.append(E.LogRecord(len(log), k, v))
        self.out.append(f"append #{eff.append_id} " + (
            f"committed at offset {base}" if error is ErrorCode.NONE else f"failed: {error.name}"))
        self.step(E.AppendCompleted(eff.append_id, error,
                                    base if error is ErrorCode.NONE else -1, now_ms=self.now))

    # ------------------------------------------------------------------ text

    @staticmethod
    def record_text(key, value) -> str:
        if isinstance(key, OffsetCommitKey):
            what = f"offset {key.group} {key.topic}-{key.partition}"
            if value is None:
                return what + " tombstone"
            assert isinstance(value, OffsetCommitValue)
            extra = f" expire={value.expire_timestamp}" if value.expire_timestamp >= 0 else ""
            return (what + f"={value.offset} epoch={value.leader_epoch} "
                    f"meta={value.metadata!r} v{value.version}{extra}")
        assert isinstance(key, GroupMetadataKey)
        if value is None:
            return f"group {key.group} tombstone"
        assert isinstance(value, GroupMetadataValue)
        members = ",".join(
            m.member_id + (f"({m.group_instance_id})" if m.group_instance_id else "")
            + (f"[{_fmt_parts(cp.decode_assignment(m.assignment))}]" if value.protocol_type
               == cp.PROTOCOL_TYPE else "") for m in value.members)
        return (f"group {key.group} gen={value.generation} protocol={value.protocol} "
                f"leader={value.leader} members=[{members}]")

    def answer_text(self, r) -> str:
        if isinstance(r, X.JoinGroupResponse):
            if r.error is not ErrorCode.NONE:
                return f"{r.error.name}" + (f" member={r.member_id}" if r.member_id else "")
            text = (f"NONE member={r.member_id} gen={r.generation_id} leader={r.leader} "
                    f"protocol={r.protocol_name}")
            if r.skip_assignment:
                text += " skip_assignment"
            if r.members:
                text += " members=[" + ",".join(
                    f"{m.member_id}({_subscription_text(m.metadata)})" for m in r.members) + "]"
            return text
        if isinstance(r, X.SyncGroupResponse):
            if r.error is not ErrorCode.NONE:
                return r.error.name
            return (f"NONE protocol={r.protocol_name} assignment="
                    f"{_fmt_parts(cp.decode_assignment(r.assignment))}")
        if isinstance(r, X.HeartbeatResponse):
            return r.error.name
        if isinstance(r, X.LeaveGroupResponse):
            if r.error is not ErrorCode.NONE:
                return r.error.name
            return "NONE " + " ".join(f"{m.member_id or m.group_instance_id}={m.error.name}"
                                      for m in r.members)
        if isinstance(r, X.OffsetCommitResponse | X.OffsetDeleteResponse):
            if isinstance(r, X.OffsetDeleteResponse) and r.error is not ErrorCode.NONE:
                return r.error.name
            return " ".join(f"{t}-{p.partition}={p.error.name}" for t, ps in r.topics for p in ps)
        if isinstance(r, X.OffsetFetchResponse):
            parts = []
            for g in r.groups:
                if g.error is not ErrorCode.NONE:
                    parts.append(f"{g.group_id}: {g.error.name}")
                    continue
                offs = " ".join(
                    f"{t}-{o.partition}=" + (o.error.name if o.error is not ErrorCode.NONE
                                             else f"{o.offset}" + (f":{o.metadata}"
                                                                   if o.metadata else ""))
                    for t, os_ in g.topics for o in os_)
                parts.append(f"{g.group_id}: {offs or '(none)'}")
            return "; ".join(parts)
        if isinstance(r, X.ListGroupsResponse):
            return r.error.name + " " + (" ".join(
                f"{g.group_id}({g.state},{g.protocol_type or '-'})" for g in r.groups) or "-")
        if isinstance(r, X.DescribeGroupsResponse):
            out = []
            for g in r.groups:
                if g.error is not ErrorCode.NONE:
                    out.append(f"{g.group_id}: {g.error.name}")
                    continue
                members = ",".join(
                    m.member_id + (f"[{_fmt_parts(cp.decode_assignment(m.assignment))}]"
                                   if m.assignment else "") for m in g.members)
                out.append(f"{g.group_id}: {g.state} type={g.protocol_type or '-'} "
                           f"protocol={g.protocol_data or '-'} members=[{members}]")
            return "; ".join(out)
        if isinstance(r, X.DeleteGroupsResponse):
            return " ".join(f"{g}={e.name}" for g, e in r.results)
        raise AssertionError(f"unknown response {r!r}")

    # ------------------------------------------------------------------ checks

    def check(self) -> None:
        for v in violations(self.core):
            self.out.append(f"INVARIANT {v}")

    def check_join_metadata(self, group: str, r: X.JoinGroupResponse) -> None:
        for m in r.members:
            sent = self.sent_meta.get((group, m.member_id))
            if sent is not None and sent != m.metadata:
                self.out.append(f"MISMATCH metadata of {m.member_id}")

    # ------------------------------------------------------------------ commands

    def run(self, line: str) -> list[str]:
        self.out = []
        words = line.split()
        cmd, args = words[0], words[1:]
        kv = dict(a.split("=", 1) for a in args if "=" in a)
        pos = [a for a in args if "=" not in a]
        getattr(self, "cmd_" + cmd.replace("-", "_"))(pos, kv)
        self.check()
        return self.out

    def cmd_config(self, pos, kv) -> None:
        self._new_core(kv)

    def cmd_lead(self, pos, kv) -> None:
        p = int(pos[0])
        if "hold" in pos:
            self.held_loads[p] = -1
        self.step(E.BecameCoordinator(p, int(kv.get("epoch", 0)), now_ms=self.now))

    def cmd_loaded(self, pos, kv) -> None:
        p = int(pos[0])
        self.load(p, self.held_loads.pop(p))

    def cmd_resign(self, pos, kv) -> None:
        epoch = int(kv["epoch"]) if "epoch" in kv else None
        self.step(E.ResignedCoordinator(int(pos[0]), epoch, now_ms=self.now))

    def cmd_advance(self, pos, kv) -> None:
        self.now += int(pos[0])
        self.step(E.Tick(now_ms=self.now))

    def cmd_appends(self, pos, kv) -> None:
        self.hold = pos[0] == "hold"

    def cmd_complete(self, pos, kv) -> None:
        n = len(self.held) if pos and pos[0] == "all" else int(pos[0]) if pos else 1
        error = ErrorCode[kv.get("error", "NONE")]
        for _ in range(n):
            if not self.held:
                self.out.append("no append held")
                return
            self.complete(self.held.pop(0), error)

    def cmd_join(self, pos, kv) -> None:
        group, client = pos[0], pos[1]
        ptype = kv.get("type", cp.PROTOCOL_TYPE)
        topics = kv.get("topics", "t").split(",")
        owned = _parts(kv.get("owned", ""))
        meta = cp.encode_subscription(topics, owned=owned, version=1) \
            if ptype == cp.PROTOCOL_TYPE else f"{client}:{kv.get('topics', '')}".encode()
        names = [n for n in kv.get("protocols", "range").split(",") if n]
        protocols = tuple(E.Protocol(n, meta) for n in names)
        member = kv.get("member", "")
        rid = self.next_rid()
        ev = E.JoinGroup(group, member_id=member, group_instance_id=kv.get("instance"),
                         client_id=client, client_host=f"/{client}",
                         session_timeout_ms=int(kv.get("session", 10_000)),
                         rebalance_timeout_ms=int(kv.get("rebalance", 60_000)),
                         protocol_type=ptype, protocols=protocols,
                         request_id=rid, api_version=int(kv.get("v", 9)), now_ms=self.now)
        if member:
            self.sent_meta[(group, member)] = meta
        self.labels[rid] = f"join {member or kv.get('instance') or client}"
        for eff in self.core.step(ev):
            if isinstance(eff, X.Answer) and isinstance(eff.response, X.JoinGroupResponse):
                if eff.request_id == rid and eff.response.member_id:
                    self.sent_meta[(group, eff.response.member_id)] = meta
                self.check_join_metadata(group, eff.response)
            self.carry_out(eff)

    def cmd_sync(self, pos, kv) -> None:
        group, member = pos[0], pos[1]
        assignments = []
        for part in (p for p in kv.get("assign", "").split(";") if p):
            mid, _, tps = part.partition(":")
            data = cp.encode_assignment(_parts(tps))
            self.sent_assign[(group, mid)] = data
            assignments.append((mid, data))
        rid = self.next_rid()
        self.labels[rid] = f"sync {member}"
        ev = E.SyncGroup(group, int(kv["gen"]), member, kv.get("instance"),
                         assignments=tuple(assignments), request_id=rid, now_ms=self.now)
        self.step(ev)

    def cmd_heartbeat(self, pos, kv) -> None:
        rid = self.next_rid()
        self.request(f"heartbeat {pos[1]}", E.Heartbeat(
            pos[0], int(kv["gen"]), pos[1], kv.get("instance"), request_id=rid,
            now_ms=self.now))

    def cmd_leave(self, pos, kv) -> None:
        if "instance" in kv:
            members = tuple(E.MemberIdentity("", i) for i in kv["instance"].split(","))
        else:
            members = tuple(E.MemberIdentity(m) for m in pos[1].split(","))
        rid = self.next_rid()
        self.request(f"leave {pos[0]}", E.LeaveGroup(pos[0], members, request_id=rid,
                                                     api_version=3, now_ms=self.now))

    def cmd_commit(self, pos, kv) -> None:
        topics: dict[str, list[E.CommitPartition]] = {}
        for k, v in kv.items():
            if "-" not in k or k in ("member",):
                continue
            tp = _tp(k)
            offset, _, meta = v.partition(":")
            topics.setdefault(tp.topic, []).append(
                E.CommitPartition(tp.partition, int(offset), 3, meta))
        rid = self.next_rid()
        self.request(f"commit {pos[0]}", E.OffsetCommit(
            pos[0], int(kv.get("gen", -1)), kv.get("member", ""), kv.get("instance"),
            int(kv.get("retention", -1)),
            tuple((t, tuple(ps)) for t, ps in topics.items()),
            request_id=rid, api_version=int(kv.get("v", 8)), now_ms=self.now))

    def cmd_fetch(self, pos, kv) -> None:
        tps = [_tp(x) for x in pos[1:] if x != "stable"]
        wanted: dict[str, list[int]] = {}
        for tp in tps:
            wanted.setdefault(tp.topic, []).append(tp.partition)
        topics = tuple((t, tuple(ps)) for t, ps in wanted.items()) if tps else None
        rid = self.next_rid()
        self.request(f"fetch {pos[0]}", E.OffsetFetch(
            tuple(E.FetchGroup(g, topics) for g in pos[0].split(",")),
            require_stable="stable" in pos, request_id=rid, api_version=8, now_ms=self.now))

    def cmd_list(self, pos, kv) -> None:
        rid = self.next_rid()
        states = tuple(s for s in kv.get("states", "").split(",") if s)
        self.request("list", E.ListGroups(states, request_id=rid, now_ms=self.now))

    def cmd_describe(self, pos, kv) -> None:
        rid = self.next_rid()
        self.request("describe", E.DescribeGroups(tuple(pos), request_id=rid, now_ms=self.now))

    def cmd_delete(self, pos, kv) -> None:
        rid = self.next_rid()
        self.request("delete", E.DeleteGroups(tuple(pos), request_id=rid, now_ms=self.now))

    def cmd_offset_delete(self, pos, kv) -> None:
        wanted: dict[str, list[int]] = {}
        for tp in (_tp(x) for x in pos[1:]):
            wanted.setdefault(tp.topic, []).append(tp.partition)
        rid = self.next_rid()
        self.request(f"offset-delete {pos[0]}", E.OffsetDelete(
            pos[0], tuple((t, tuple(ps)) for t, ps in wanted.items()), request_id=rid,
            now_ms=self.now))

    def cmd_show(self, pos, kv) -> None:
        core = self.core
        gids = pos or sorted(core.groups)
        for gid in gids:
            g = core.groups.get(gid)
            if g is None:
                self.out.append(f"{gid}: (none)")
                continue
            line = (f"{gid}: {g.state} gen={g.generation_id} type={g.protocol_type or '-'} "
                    f"protocol={g.protocol_name or '-'} leader={g.leader_id or '-'}")
            self.out.append(line)
            for m in g.members.values():
                parts = [m.member_id]
                if m.group_instance_id:
                    parts.append(f"instance={m.group_instance_id}")
                if m.assignment is not None and g.protocol_type == cp.PROTOCOL_TYPE:
                    parts.append(f"assignment={_fmt_parts(cp.decode_assignment(m.assignment))}")
                    sent = self.sent_assign.get((gid, m.member_id))
                    if sent is not None and sent != m.assignment and m.assignment:
                        parts.append("MISMATCH")
                if m.awaiting_join is not None:
                    parts.append(f"parked-join=r{m.awaiting_join}")
                if m.awaiting_sync is not None:
                    parts.append(f"parked-sync=r{m.awaiting_sync}")
                hb = core.timer_deadline(("heartbeat", gid, m.member_id))
                if hb is not None:
                    parts.append(f"session-deadline={hb}")
                self.out.append("  member " + " ".join(parts))
            for mid in sorted(g.pending_members):
                self.out.append(f"  pending {mid} deadline="
                                f"{core.timer_deadline(('heartbeat', gid, mid))}")
            if g.offsets:
                self.out.append("  offsets " + " ".join(
                    f"{tp}={o.offset}" for tp, o in sorted(g.offsets.items())))
            for kind in ("join", "sync"):
                d = core.timer_deadline((kind, gid))
                if d is not None:
                    self.out.append(f"  {kind}-deadline={d}")

    def cmd_log(self, pos, kv) -> None:
        for rec in self.logs.get(int(pos[0]), []):
            r = decode_record(rec.key, rec.value)
            self.out.append(f"{rec.offset}: {self.record_text(r.key, r.value)}")


def run_script(path: Path) -> tuple[str, str]:
    """(expected, actual) text of a script file (tests/datadriven.py's format)."""
    return datadriven.run_script(path, Scenario().run)


rewrite_requested = datadriven.rewrite_requested
