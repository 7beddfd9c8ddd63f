"""A scenario-script driver for the controller's pure core (etcd-raft's datadriven tests).

A script is a sequence of blocks:

    command arg key=value ...
    ----
    expected output lines

separated by blank lines. The driver keeps one ControllerContext, runs each command through
decisions.py, applies the decision as if every ZooKeeper write succeeded, and prints what the
decision did: the partition-state writes, elections and the requests per broker. `show` prints
every partition's state. Run with REWRITE=1 to regenerate the expected output (then review the
diff: that review is the test).

Commands:
    broker ID [rack=R]             register a broker (no decision; use `start` for a restart)
    start ID...                    brokers (re)register: on_brokers_started
    kill ID...                     brokers' sessions end: on_brokers_failed
    bounce ID                      re-register with a new broker epoch (failure, then startup)
    create-topic T partitions=N rf=R start=S [P:B,B,B ...]   (start = Kafka's fixed start index)
    config T key=value             topic config override
    unclean-default true|false     unclean.leader.election.enable of the controller
    shutdown ID                    controlled shutdown; prints the remaining leaderships
    alter T-P isr=B,B [leader_epoch=E] [partition_epoch=E] [by=B] [relinquish] [recovered]
    elect preferred|unclean [T-P ...]   (none = all partitions)
    rebalance [pct]                automatic preferred election (imbalance check)
    delete T                       start topic deletion
    stop-replica-ack ID T-P... [error=CODE]
    failover                       a new controller loads this state (epoch + 1)
    time MS                        set the clock
    show                           all partition states
"""

from __future__ import annotations

import os
import random
from pathlib import Path

from common.errors import ErrorCode
from common.names import TopicPartition
from common.zk_layout import BrokerRegistration, ControllerInfo, TopicAssignment
from controller import decisions as D
from controller.assignment import BrokerMetadata, assign_replicas
from controller.context import ControllerContext
from controller.request_batch import build_requests

CTL = ControllerInfo(100, "127.0.0.1", 9999)


def _tp(text: str) -> TopicPartition:
    t, _, p = text.rpartition("-")
    return TopicPartition(t, int(p))


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def _fmt_list(xs) -> str:
    return "[" + ",".join(str(x) for x in xs) + "]"


class Scenario:
    def __init__(self) -> None:
        self.ctx = ControllerContext(controller_id=CTL.controller_id, epoch=1,
                                     relinquish_cooldown_ms=300_000)
        self.next_czxid = 100
        self.now = 0.0

    # ------------------------------------------------------------------ helpers

    def register(self, broker_id: int, rack: str | None = None) -> None:
        self.next_czxid += 1
        self.ctx.add_broker(BrokerRegistration(broker_id, "127.0.0.1", 9000 + broker_id,
                                               rack=rack, epoch=self.next_czxid))

    def run_decision(self, d: D.Decision) -> list[str]:
        D.apply(self.ctx, d)
        out = []
        for e in d.elections:
            out.append(f"elect {e.tp} {e.old_leader}->{e.new_leader} epoch={e.leader_epoch} "
                       f"reason={e.reason}" + (" UNCLEAN" if e.unclean else ""))
        for tp in d.writes:
            out.append(f"write {self.state_line(tp)}")
        for tp, o in sorted(d.outcomes.items()):
            if o.error != ErrorCode.NONE or o.message:
                out.append(f"outcome {tp} {o.error.name}" +
                           (f": {o.message}" if o.message else ""))
            else:
                out.append(f"outcome {tp} NONE")
        batches = build_requests(self.ctx, d, CTL)
        for broker, bb in sorted(batches.items()):
            for r in bb.leader_and_isr:
                parts = " ".join(
                    f"{s.topic}-{s.partition}(l={s.leader},e={s.leader_epoch}"
                    + (",new" if s.is_new else "") + ")" for s in r.partition_states)
                out.append(f"  -> {broker} LeaderAndIsr {parts}")
            for r in bb.update_metadata:
                parts = " ".join(f"{s.topic}-{s.partition}" for s in r.partition_states)
                out.append(f"  -> {broker} UpdateMetadata live={_fmt_list(b.broker_id for b in r.live_brokers)}"
                           + (f" {parts}" if parts else ""))
            for r in bb.stop_replica:
                parts = " ".join(f"{s.topic}-{s.partition}" + ("(delete)" if s.delete_partition
                                                                else "")
                                 for s in r.partition_states)
                out.append(f"  -> {broker} StopReplica {parts}")
        for t in sorted(d.deletable_topics):
            out.append(f"deletable {t}")
        return out

    def state_line(self, tp: TopicPartition) -> str:
        s = self.ctx.leadership.get(tp)
        st = self.ctx.partition_sm.state(tp)
        if s is None:
            return f"{tp} no-state {st}"
        rec = " RECOVERING" if s.leader_recovery_state == 1 else ""
        return (f"{tp} leader={s.leader} leader_epoch={s.leader_epoch} isr={_fmt_list(s.isr)} "
                f"partition_epoch={s.partition_epoch} {st}{rec}")

    # ------------------------------------------------------------------ commands

    def run(self, line: str) -> list[str]:
        words = line.split()
        cmd, args = words[0], words[1:]
        kv = dict(a.split("=", 1) for a in args if "=" in a)
        pos = [a for a in args if "=" not in a]
        ctx = self.ctx
        if cmd == "broker":
            self.register(int(pos[0]), kv.get("rack"))
            return []
        if cmd == "start":
            ids = [int(x) for x in pos]
            for i in ids:
                self.register(i, kv.get("rack"))
            return self.run_decision(D.on_brokers_started(ctx, ids))
        if cmd == "kill":
            ids = [int(x) for x in pos]
            for i in ids:
                ctx.remove_broker(i)
            return self.run_decision(D.on_brokers_failed(ctx, ids))
        if cmd == "bounce":
            i = int(pos[0])
            rack = ctx.live_brokers[i].rack
            ctx.remove_broker(i)
            out = self.run_decision(D.on_brokers_failed(ctx, [i]))
            self.register(i, rack)
            return out + self.run_decision(D.on_brokers_started(ctx, [i]))
        if cmd == "create-topic":
            topic = pos[0]
            explicit = {int(p): _ints(bs) for p, bs in (x.split(":") for x in pos[1:])}
            if explicit:
                assignment = explicit
            else:
                metas = [BrokerMetadata(b, r.rack) for b, r in ctx.live_brokers.items()]
                assignment = assign_replicas(metas, int(kv.get("partitions", 1)),
                                             int(kv.get("rf", 1)), rng=random.Random(0),
                                             fixed_start_index=int(kv.get("start", 0)))
            ctx.add_topic(TopicAssignment(topic, f"id-{topic}", assignment), {})
            tps = ctx.partitions_of(topic)
            return ([f"assign {topic} " + " ".join(f"{p}:{','.join(map(str, r))}"
                                                   for p, r in sorted(assignment.items()))]
                    + self.run_decision(D.on_new_partitions(ctx, tps)))
        if cmd == "config":
            ctx.topic_configs.setdefault(pos[0], {}).update(kv)
            return []
        if cmd == "unclean-default":
            ctx.unclean_leader_election_default = pos[0] == "true"
            return []
        if cmd == "shutdown":
            i = int(pos[0])
            ctx.shutting_down.add(i)
            out = self.run_decision(D.controlled_shutdown(ctx, i))
            remaining = D.remaining_leaderships(ctx, i)
            return out + [f"remaining {' '.join(map(str, remaining)) or '-'}"]
        if cmd == "alter":
            tp = _tp(pos[0])
            s = ctx.leadership[tp]
            by = int(kv.get("by", s.leader))
            item = D.AlterPartitionItem(
                tp, int(kv.get("leader_epoch", s.leader_epoch)),
                tuple((b, -1) for b in _ints(kv["isr"])),
                int(kv.get("partition_epoch", s.partition_epoch)),
                0 if "recovered" in pos else s.leader_recovery_state,
                relinquish_leadership="relinquish" in pos)
            try:
                d = D.alter_partition(ctx, by, ctx.broker_epoch(by) or -1, [item], self.now)
            except D.StaleBrokerEpoch as e:
                return [f"rejected STALE_BROKER_EPOCH: {e}"]
            return self.run_decision(d)
        if cmd == "elect":
            kind = D.ElectionType.PREFERRED if pos[0] == "preferred" else D.ElectionType.UNCLEAN
            tps = [_tp(x) for x in pos[1:]] or None
            return self.run_decision(D.elect_leaders(ctx, kind, tps, self.now))
        if cmd == "rebalance":
            pct = int(pos[0]) if pos else 10
            tps = D.imbalanced_partitions(ctx, pct, self.now)
            return ([f"imbalanced {' '.join(map(str, tps)) or '-'}"]
                    + (self.run_decision(D.elect_leaders(ctx, D.ElectionType.PREFERRED, tps,
                                                         self.now)) if tps else []))
        if cmd == "delete":
            ctx.topics_to_delete.add(pos[0])
            return self.run_decision(D.start_topic_deletion(ctx, [pos[0]]))
        if cmd == "stop-replica-ack":
            broker = int(pos[0])
            err = ErrorCode(int(kv.get("error", 0)))
            d = D.on_stop_replica_response(ctx, broker, {_tp(x): err for x in pos[1:]})
            out = self.run_decision(d)
            for t in sorted(d.deletable_topics):
                out += self.run_decision(D.finish_topic_deletion(ctx, t))
                ctx.remove_topic(t)
                out.append(f"deleted {t}")
            return out
        if cmd == "failover":
            ctx.epoch += 1
            ctx.reset_states()
            return self.run_decision(D.on_controller_failover(ctx))
        if cmd == "time":
            self.now = float(pos[0])
            return []
        if cmd == "show":
            return [self.state_line(tp) for tp in ctx.all_partitions()]
        raise ValueError(f"unknown command {cmd!r}")


def run_script(path: Path) -> tuple[str, str]:
    """(expected, actual) text of a script file."""
    text = path.read_text()
    blocks = [b for b in text.strip("\n").split("\n\n") if b.strip()]
    sc = Scenario()
    expected, actual = [], []
    for block in blocks:
        lines = block.split("\n")
        if lines and lines[0].startswith("#"):
            comment = [ln for ln in lines if ln.startswith("#")]
            lines = lines[len(comment):]
            expected += comment
            actual += comment
            if not lines:
                expected.append("")
                actual.append("")
                continue
        cmd = lines[0]
        sep = lines.index("----") if "----" in lines else len(lines)
        exp = lines[sep + 1:]
        got = sc.run(cmd)
        expected += [cmd, "----", *exp, ""]
        actual += [cmd, "----", *got, ""]
    return "\n".join(expected), "\n".join(actual)


def rewrite_requested() -> bool:
    return os.environ.get("REWRITE") == "1"
