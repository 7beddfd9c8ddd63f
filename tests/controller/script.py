"""Scenario scripts for the controller core (etcd-raft's datadriven tests).

A script is a sequence of blocks:

    command arg key=value ...
    ----
    expected output lines

separated by blank lines. Every command goes through `ControllerCore.step()` exactly as the
real shell runs it (tests/sim/driver.py: the same effects, carried out over the in-memory
store, with ZooKeeper watches firing the same events): a broker registering fires the
/brokers/ids watch, a topic config znode fires its config watch, an RPC is a request event.
The output is what the controller did: each applied decision's elections, partition-state
writes and per-partition outcomes, and the requests per broker. `show` prints every
partition's state, and checks it equals what the store holds. Run with REWRITE=1 to regenerate
the expected output (then review the diff: that review is the test).

Commands:
    broker ID [rack=R]             register a broker (output not shown: cluster setup)
    start ID... [unclean]          brokers (re)register; `unclean`: after an unclean shutdown
                                   (KIP-966: they leave every ISR and ELR)
    kill ID...                     brokers' sessions end
    bounce ID [unclean]            re-register with a new broker epoch between two reads
    create-topic T partitions=N rf=R start=S [P:B,B,B ...]   (start = Kafka's fixed start index)
    create-partitions T count=N [B,B,B ...] [validate]   CreatePartitions (one replica list
                                   per new partition, or none: the controller places them)
    config T key=value             topic config override (fires the config watch)
    unclean-default true|false     unclean.leader.election.enable of the controller
    cluster key=value ...          the controller's config (eligible.leader.replicas.enable,
                                   min.insync.replicas, unclean.recovery.strategy, ...); the
                                   running core and every later one read it
    shutdown ID                    ControlledShutdown; prints the remaining leaderships
    alter T-P isr=B,B [leader_epoch=E] [partition_epoch=E] [by=B] [relinquish] [recovered]
    elect preferred|unclean [T-P ...]   (none = all partitions)
    rebalance [pct]                the automatic preferred-election timer fires
    delete T                       DeleteTopics
    stop-replica-ack ID T-P... [error=CODE]
    failover                       the controller dies; a new one loads the store (epoch + 1)
    crash-after N                  the controller dies after N effects of the next command
    fail-write T-P...|moved        the next state write is refused for these partitions
                                   (their znode version moved), or as a whole (deposed)
    reassign T-P=B,B [T-P=B,B ...] AlterPartitionReassignments (T-P=cancel cancels)
    admin-reassign T-P=B,B ...|JSON   a tool writes /admin/reassign_partitions (fires its watch)
    list-reassignments             ListPartitionReassignments
    catch-up T-P                   the leader adds every live replica to the ISR (AlterPartition)
    restart ID T-P... [dir=D] [epoch=E]   broker ID lost these replicas with log dir D: it
                                   writes a /restart_partitions entry (fires the children
                                   watch), fenced by partition epoch E if given (the epoch
                                   it held; none: an entry from before the fence);
                                   `restart garbage` writes an unreadable entry
    restart-entries                the /restart_partitions entries left in the store
    time MS                        set the clock
    advance MS                     the clock moves on MS; due timers fire
    log-info ID T-P=E:LEO ...|fail broker ID answers its latest GetReplicaLogInfo (KIP-966):
                                   last written leader epoch E and log end offset LEO per
                                   partition (T-P=CODE_NAME: an error), or the RPC fails
    show                           all partition states (and assignments of moving ones)
"""

from __future__ import annotations

import random
from pathlib import Path

from common.assignment import BrokerMetadata, assign_replicas
from common.config import KEYS
from common.errors import ErrorCode
from common.names import TopicPartition
from common.zk_layout import (
    LEADER_RECOVERING,
    RestartEntry,
    encode_reassignment,
    encode_restart_entry,
)
from controller import decisions as D
from controller import effects as X
from controller import events as E
from controller.elr import ElrConfig
from controller.store import WatchedEvent
from tests import datadriven
from tests.sim.driver import Crashed, Driver

# Event-log records a script shows, without these fields (they vary or repeat the command)
_SHOWN_EVENTS: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("partitions_restarted", "partitions_restart_incomplete",
                     "restart_entry_invalid"), ("entry", "broker_epoch")),
    **dict.fromkeys(("unclean_recovery_started", "unclean_recovery_finished",
                     "replica_log_info_failed"), ("broker_epoch", "error")),
    "leader_and_isr_errors": (),
}


def _tp(text: str) -> TopicPartition:
    t, _, p = text.rpartition("-")
    return TopicPartition(t, int(p))


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def _fmt_list(xs) -> str:
    return "[" + ",".join(str(x) for x in xs) + "]"


class Scenario:
    def __init__(self) -> None:
        self.d = Driver()
        self.d.on_effect = self._on_effect
        self.out: list[str] = []
        self.quiet = False
        self.pending_elections: set[int] = set()  # ElectLeaders waiting for a recovery
        self.answered_queries: set[tuple[int, int]] = set()
        self.d.elect()

    @property
    def ctx(self):
        return self.d.core.ctx

    # ------------------------------------------------------------------ output

    def _on_effect(self, eff: X.Effect) -> None:
        if self.quiet:
            return
        if isinstance(eff, X.Decided):
            self.out += self._decision_lines(eff.decision, eff.failed)
        elif isinstance(eff, X.SendRequests):
            self.out += self._request_lines(eff.batches)
        elif isinstance(eff, X.TopicDeleted):
            self.out.append(f"deleted {eff.topic}")
        elif isinstance(eff, X.Reply) and eff.error is not None:
            self.out.append(f"rejected {eff.error.error_code.name}: {eff.error.message}")
        elif isinstance(eff, X.Reply) and eff.request_id in self.pending_elections:
            self.pending_elections.discard(eff.request_id)
            self.out += [f"answer {r.tp} {r.error_code.name}"
                         + (f": {r.error_message}" if r.error_message else "")
                         for r in eff.value]
        elif isinstance(eff, X.QueryReplicaLogs):
            self.out.append(f"  -> {eff.broker_id} GetReplicaLogInfo "
                            + " ".join(str(tp) for tp, _ in eff.partitions))
        elif isinstance(eff, X.WriteTopicAssignment):
            a = eff.assignment
            self.out.append(f"write-assignment {a.topic} " + " ".join(
                self._assignment_text(a, p) for p in sorted(a.partitions)))
        elif isinstance(eff, X.WriteAdminReassignments):
            self.out.append("write /admin/reassign_partitions " + (" ".join(
                f"{tp}={','.join(map(str, r))}" for tp, r in sorted(eff.entries.items()))
                or "(deleted)"))
        elif isinstance(eff, X.Emit) and eff.name == "reassignment_step":
            self.out.append(f"step {eff.fields['step']} {eff.fields['partition']}")
        elif isinstance(eff, X.DeleteRestartEntry):
            self.out.append(f"delete /restart_partitions/{eff.name}")
        elif isinstance(eff, X.Emit) and eff.name in _SHOWN_EVENTS:
            f = {k: v for k, v in eff.fields.items()
                 if k not in _SHOWN_EVENTS[eff.name] + ("controller_epoch",)}
            self.out.append(f"{eff.name} {f}")
        elif isinstance(eff, X.Emit) and eff.name in ("reassignment_rejected",
                                                      "reassignment_stalled",
                                                      "invalid_state_transition"):
            f = {k: v for k, v in eff.fields.items() if k != "controller_epoch"}
            self.out.append(f"{eff.name} {f}")

    @staticmethod
    def _assignment_text(a, p: int) -> str:
        text = f"{p}:{','.join(map(str, a.partitions[p]))}"
        if a.adding_replicas.get(p):
            text += f"(+{','.join(map(str, a.adding_replicas[p]))})"
        if a.removing_replicas.get(p):
            text += f"(-{','.join(map(str, a.removing_replicas[p]))})"
        return text

    def _decision_lines(self, d: D.Decision, failed) -> list[str]:
        out = []
        for e in d.elections:
            if e.tp not in failed:
                out.append(f"elect {e.tp} {e.old_leader}->{e.new_leader} "
                           f"epoch={e.leader_epoch} reason={e.reason}"
                           + (" UNCLEAN" if e.unclean else ""))
        for tp in d.writes:
            out.append(f"refused {tp}" if tp in failed else f"write {self.state_line(tp)}")
        for tp, o in sorted(d.outcomes.items()):
            if o.error != ErrorCode.NONE or o.message:
                out.append(f"outcome {tp} {o.error.name}" +
                           (f": {o.message}" if o.message else ""))
            else:
                out.append(f"outcome {tp} NONE")
        for t in sorted(d.deletable_topics):
            out.append(f"deletable {t}")
        for tp, strategy in sorted(d.recoveries.items()):
            out.append(f"needs-recovery {tp} {strategy}")
        return out

    @staticmethod
    def _request_lines(batches) -> list[str]:
        out = []
        for broker, bb in sorted(batches.items()):
            for r in bb.leader_and_isr:
                parts = " ".join(
                    f"{s.topic}-{s.partition}(l={s.leader},e={s.leader_epoch}"
                    + (",new" if s.is_new else "") + ")" for s in r.partition_states)
                out.append(f"  -> {broker} LeaderAndIsr {parts}")
            for r in bb.update_metadata:
                parts = " ".join(f"{s.topic}-{s.partition}" for s in r.partition_states)
                live = _fmt_list(b.broker_id for b in r.live_brokers)
                out.append(f"  -> {broker} UpdateMetadata live={live}"
                           + (f" {parts}" if parts else ""))
            for r in bb.stop_replica:
                parts = " ".join(f"{s.topic}-{s.partition}" + ("(delete)" if s.delete_partition
                                                                else "")
                                 for s in r.partition_states)
                out.append(f"  -> {broker} StopReplica {parts}")
        return out

    def state_line(self, tp: TopicPartition) -> str:
        s = self.ctx.leadership.get(tp)
        st = self.ctx.partition_sm.state(tp)
        if s is None:
            return f"{tp} no-state {st}"
        rec = " RECOVERING" if s.leader_recovery_state == LEADER_RECOVERING else ""
        # KIP-966 sets, only when not empty (scripts without ELR read as before)
        elr = (f" elr={_fmt_list(s.elr)}" if s.elr else "") + \
            (f" lke={_fmt_list(s.last_known_elr)}" if s.last_known_elr else "")
        return (f"{tp} leader={s.leader} leader_epoch={s.leader_epoch} isr={_fmt_list(s.isr)}"
                f"{elr} partition_epoch={s.partition_epoch} {st}{rec}")

    # ------------------------------------------------------------------ commands

    def _settle(self) -> None:
        try:
            self.d.run()
        except Crashed as e:
            self.out.append(f"controller crashed ({e}); effects lost from here")

    def _request(self, ev: E.Event) -> X.Reply | None:
        rid = self.d.request(ev)
        self._settle()
        return self.d.replies.get(rid)

    def run(self, line: str) -> list[str]:
        self.out = []
        words = line.split()
        cmd, args = words[0], words[1:]
        kv = dict(a.split("=", 1) for a in args if "=" in a)
        pos = [a for a in args if "=" not in a]
        d = self.d
        if cmd == "broker":
            self.quiet = True
            d.register(int(pos[0]), kv.get("rack"))
            self._settle()
            self.quiet = False
            return []
        if cmd == "start":
            for i in (int(x) for x in pos if x != "unclean"):
                d.register(i, kv.get("rack"), clean_shutdown="unclean" not in pos)
            self._settle()
        elif cmd == "kill":
            for i in (int(x) for x in pos):
                d.kill(i)
            self._settle()
        elif cmd == "bounce":
            i = int(pos[0])
            rack = self.ctx.live_brokers[i].rack
            d.kill(i)
            d.register(i, rack, clean_shutdown="unclean" not in pos)
            self._settle()
        elif cmd == "create-topic":
            topic = pos[0]
            explicit = {int(p): _ints(bs) for p, bs in (x.split(":") for x in pos[1:])}
            if explicit:
                assignment = explicit
            else:
                metas = [BrokerMetadata(b, r.rack) for b, r in self.ctx.live_brokers.items()]
                assignment = assign_replicas(metas, int(kv.get("partitions", 1)),
                                             int(kv.get("rf", 1)), rng=random.Random(0),
                                             fixed_start_index=int(kv.get("start", 0)))
            self.out.append(f"assign {topic} " + " ".join(
                f"{p}:{','.join(map(str, r))}" for p, r in sorted(assignment.items())))
            reply = self._request(E.CreateTopics(topics=(
                E.NewTopic(topic, assignments=assignment),)))
            for r in (reply.value if reply and reply.error is None else []):
                if r.error_code != ErrorCode.NONE:
                    self.out.append(f"create {r.name} {r.error_code.name}: {r.error_message}")
        elif cmd == "create-partitions":
            explicit = tuple(tuple(_ints(x)) for x in pos[1:] if x != "validate") or None
            reply = self._request(E.CreatePartitions(topics=(
                E.NewPartitions(pos[0], int(kv["count"]), explicit),),
                validate_only="validate" in pos))
            for r in (reply.value if reply and reply.error is None else []):
                self.out.append(f"answer {r.name} {r.error_code.name}"
                                + (f": {r.error_message}" if r.error_message else ""))
        elif cmd == "config":
            d.tree.configs.setdefault(pos[0], {}).update(kv)
            d.tree.fire(("config", pos[0]), WatchedEvent("CHANGED", pos[0]))
            self._settle()
        elif cmd == "cluster":
            d.config.update({k: KEYS[k].parse(v) for k, v in kv.items()})
            self.ctx.elr = ElrConfig.from_config(d.config)
            self.ctx.unclean_leader_election_default = bool(
                d.config["unclean.leader.election.enable"])
        elif cmd == "unclean-default":
            d.config["unclean.leader.election.enable"] = pos[0] == "true"
            self.ctx.unclean_leader_election_default = pos[0] == "true"
        elif cmd == "shutdown":
            reply = self._request(E.ControlledShutdown(broker_id=int(pos[0])))
            if reply is not None and reply.error is None:
                self.out.append(f"remaining {' '.join(map(str, reply.value)) or '-'}")
        elif cmd == "alter":
            tp = _tp(pos[0])
            s = self.ctx.leadership[tp]
            by = int(kv.get("by", s.leader))
            item = D.AlterPartitionItem(
                tp, int(kv.get("leader_epoch", s.leader_epoch)),
                tuple((b, -1) for b in _ints(kv["isr"])),
                int(kv.get("partition_epoch", s.partition_epoch)),
                0 if "recovered" in pos else s.leader_recovery_state,
                relinquish_leadership="relinquish" in pos)
            self._request(E.AlterPartition(broker_id=by,
                                           broker_epoch=self.ctx.broker_epoch(by) or -1,
                                           items=(item,)))
        elif cmd == "elect":
            kind = D.ElectionType.PREFERRED if pos[0] == "preferred" else D.ElectionType.UNCLEAN
            tps = tuple(_tp(x) for x in pos[1:]) or None
            rid = d.request(E.ElectLeaders(election_type=kind, partitions=tps))
            if kind == D.ElectionType.UNCLEAN:  # its answer may wait for a recovery: shown
                self.pending_elections.add(rid)
            self._settle()
            if rid in self.pending_elections and rid not in d.replies:
                self.out.append("answer pending (waiting for the unclean recovery)")
        elif cmd == "advance":
            d.now_ms += float(pos[0])
            d.fire_timers()
            self._settle()
        elif cmd == "log-info":
            broker = int(pos[0])
            epoch = self.ctx.epoch  # query ids are per controller
            queries = [q for _i, q in d.log_queries() if q.broker_id == broker
                       and (epoch, q.query_id) not in self.answered_queries]
            if not queries:
                return [f"no GetReplicaLogInfo to broker {broker} to answer"]
            q = queries[-1]
            self.answered_queries.add((epoch, q.query_id))
            answers = None
            if "fail" not in pos:
                answers = {}
                for k, v in kv.items():
                    if ":" in v:
                        e, leo = v.split(":")
                        answers[_tp(k)] = D.ReplicaLogInfo(int(e), int(leo))
                    else:
                        answers[_tp(k)] = D.ReplicaLogInfo(-1, -1, ErrorCode[v])
            d.post(E.ReplicaLogInfoResponse(query_id=q.query_id, broker_id=broker,
                                            broker_epoch=q.broker_epoch, answers=answers,
                                            error="" if answers is not None else "UNAVAILABLE"))
            self._settle()
        elif cmd == "rebalance":
            pct = int(pos[0]) if pos else 10
            d.config["leader.imbalance.per.broker.percentage"] = pct
            tps = D.imbalanced_partitions(self.ctx, pct, d.now_ms)
            self.out.append(f"imbalanced {' '.join(map(str, tps)) or '-'}")
            d.post(E.TimerFired(name="auto_rebalance"))
            self._settle()
        elif cmd == "delete":
            self._request(E.DeleteTopics(topics=(pos[0],)))
        elif cmd == "stop-replica-ack":
            err = ErrorCode(int(kv.get("error", 0)))
            d.post(E.StopReplicaResponse(broker_id=int(pos[0]),
                                         errors={_tp(x): err for x in pos[1:]}))
            self._settle()
        elif cmd == "lai-refused":  # lai-refused BROKER T-P... error=CODE
            err = ErrorCode(int(kv.get("error", ErrorCode.KAFKA_STORAGE_ERROR)))
            d.post(E.LeaderAndIsrResponse(broker_id=int(pos[0]),
                                          errors={_tp(x): err for x in pos[1:]}))
            self._settle()
        elif cmd == "failover":
            d.crash()
            d.elect()
            self._settle()
        elif cmd == "crash-after":
            d.crash_after(int(pos[0]))
        elif cmd == "fail-write":
            if pos == ["moved"]:
                d.depose()
            else:
                d.refuse_next_write(_tp(x) for x in pos)
        elif cmd == "reassign":
            items = tuple((_tp(k), None if v == "cancel" else tuple(_ints(v)))
                          for k, v in (a.split("=", 1) for a in args))
            reply = self._request(E.AlterReassignments(items=items))
            for r in (reply.value if reply and reply.error is None else []):
                if r.error_code != ErrorCode.NONE:
                    self.out.append(f"answer {r.tp} {r.error_code.name}: {r.error_message}")
        elif cmd == "admin-reassign":
            if args and args[0].startswith("{"):
                data = " ".join(args).encode()
            else:
                data = encode_reassignment((tp.topic, tp.partition, _ints(v)) for tp, v in (
                    (_tp(k), v) for k, v in (a.split("=", 1) for a in args)))
            d.tree.write_reassign_partitions(data)
            self._settle()
        elif cmd == "restart":
            lost = sorted(map(_tp, pos[1:]))
            d.tree.add_restart_entry(b"{not json" if pos[0] == "garbage" else
                                     encode_restart_entry(RestartEntry(
                                         int(pos[0]), kv.get("dir", "/d0"),
                                         tuple((tp.topic, tp.partition) for tp in lost),
                                         partition_epochs=(int(kv["epoch"]),) * len(lost)
                                         if "epoch" in kv else ())))
            self._settle()
        elif cmd == "restart-entries":
            self.out += [f"entry {n}" for n in sorted(d.tree.restart_entries)] or ["(none)"]
        elif cmd == "list-reassignments":
            reply = self._request(E.ListReassignments())
            for o in (reply.value if reply else []):
                self.out.append(f"ongoing {o.tp} replicas={_fmt_list(o.replicas)} "
                                f"adding={_fmt_list(o.adding)} removing={_fmt_list(o.removing)}")
        elif cmd == "catch-up":
            tp = _tp(pos[0])
            s = self.ctx.leadership[tp]
            isr = [r for r in self.ctx.replicas(tp) if r in s.isr or r in self.ctx.live_brokers]
            item = D.AlterPartitionItem(
                tp, s.leader_epoch,
                tuple((b, self.ctx.broker_epoch(b) or -1) for b in isr), s.partition_epoch,
                s.leader_recovery_state)
            self._request(E.AlterPartition(broker_id=s.leader,
                                           broker_epoch=self.ctx.broker_epoch(s.leader) or -1,
                                           items=(item,)))
        elif cmd == "time":
            d.now_ms = float(pos[0])
        elif cmd == "show":
            if d.core is None:
                return ["no controller"]
            store = d.tree.states
            for tp in self.ctx.all_partitions():
                if self.ctx.leadership.get(tp) != store.get(tp):
                    self.out.append(f"MISMATCH {tp}: store has {store.get(tp)}")
            self.out += [self.state_line(tp) for tp in self.ctx.all_partitions()]
            for t, a in sorted(self.ctx.assignments.items()):
                if d.tree.topics.get(t) != a:
                    self.out.append(f"MISMATCH assignment {t}: store has {d.tree.topics.get(t)}")
                moving = [p for p in sorted(a.partitions)
                          if a.adding_replicas.get(p) or a.removing_replicas.get(p)]
                if moving:
                    self.out.append(f"moving {t} " + " ".join(
                        self._assignment_text(a, p) for p in moving))
            if d.tree.reassign_partitions is not None:
                self.out.append("/admin/reassign_partitions "
                                + d.tree.reassign_partitions.decode())
        else:
            raise ValueError(f"unknown command {cmd!r}")
        return self.out


def run_script(path: Path) -> tuple[str, str]:
    """(expected, actual) text of a script file (tests/datadriven.py's format)."""
    return datadriven.run_script(path, Scenario().run)


rewrite_requested = datadriven.rewrite_requested
