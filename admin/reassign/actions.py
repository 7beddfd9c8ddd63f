"""The five actions against a cluster (``--generate``, ``--execute``, ``--verify``,
``--cancel``, ``--list``): read the cluster, check the plan, then change it.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Mapping

from admin.reassign.messages import (
    CANNOT_EXECUTE_BECAUSE_OF_EXISTING,
    VERIFY_PERIODICALLY,
    cancelled_message,
    cancelled_moves_message,
    generate_output,
    list_lines,
    log_dir_move_lines,
    log_dir_moves_message,
    progress_line,
    replica_name,
    result_error_lines,
    rollback_output,
    started_message,
    verify_lines,
)
from admin.reassign.parsing import (
    TP,
    check_args,
    parse_broker_list,
    parse_log_dirs,
    parse_reassignment,
    parse_topics_to_move,
    plural,
    read_json_file,
)
from admin.reassign.planning import (
    LogDirMove,
    log_dir_move,
    propose_assignment,
    proposed_moves,
    reassignment_states,
)
from admin.reassign.throttles import alter, clear_all_throttles, set_throttles
from client import AdminClient, KafkaError
from client import reassignment as lib
from client.admin_client import PartitionReassignment
from common.assignment import BrokerMetadata
from common.errors import ErrorCode, ReplogError

DEFAULT_TIMEOUT_MS = 10000
# A broker that does not answer within this long leaves its progress unknown (a stalled
# target is when --verify matters most, so it must not hang on it).
PROGRESS_TIMEOUT_S = 5.0  # Kafka's --timeout default


_topics = lib.describe_topics
current_replicas = lib.current_replicas
_verify_brokers = lib.verify_brokers


def _fail(results: Mapping[TP, KafkaError | None]) -> bool:
    lines = result_error_lines(results)
    for line in lines:
        print(line, file=sys.stderr)
    return bool(lines)


def _timeout(args) -> int:
    return DEFAULT_TIMEOUT_MS if args.timeout is None else args.timeout


async def _generate(admin: AdminClient, args) -> int:
    topics = parse_topics_to_move(read_json_file(args.topics_to_move_json_file))
    brokers = parse_broker_list(args.broker_list)
    live = await admin.live_brokers()
    await _verify_brokers(admin, brokers)
    infos = await _topics(admin, topics)
    current = {(t, p.partition): list(p.replicas) for t in topics for p in infos[t].partitions}
    metas = [BrokerMetadata(b, None if args.disable_rack_aware else live[b].rack)
             for b in brokers]
    sys.stdout.write(generate_output(current, propose_assignment(current, metas)))
    return 0


async def execute(admin: AdminClient, args) -> int:
    proposed = parse_reassignment(read_json_file(args.reassignment_json_file))
    await _verify_brokers(admin, (b for r in proposed.values() for b in r))
    current = await current_replicas(admin, proposed)
    ongoing = await admin.list_partition_reassignments()
    if ongoing and not args.additional:
        raise ReplogError(CANNOT_EXECUTE_BECAUSE_OF_EXISTING)
    sys.stdout.write(rollback_output(current))
    undo: dict = {}
    if args.throttle or args.replica_alter_log_dirs_throttle:
        print(VERIFY_PERIODICALLY)
        undo = await set_throttles(admin, proposed_moves(ongoing, proposed, current),
                                    args.throttle, args.replica_alter_log_dirs_throttle)
    # A partition whose replicas stay as they are is not sent (lib.submit); if it names log
    # dirs it only moves between log dirs (KIP-113): AlterReplicaLogDirs below.
    moves = parse_log_dirs(read_json_file(args.reassignment_json_file))
    reassigned, results = await lib.submit(admin, proposed, current, ongoing, _timeout(args))
    if any(e is not None for e in results.values()):
        # The controller refused the request (whole, so nothing moves): the throttles set
        # for it would only slow unrelated traffic, so put them back.
        await alter(admin, undo)
        if undo:
            print("The reassignment was refused; the throttles set for it were removed.")
        _fail(results)
        return 1
    if reassigned or not moves:
        print(started_message(proposed if not moves else reassigned))
    if moves:
        await _execute_log_dir_moves(admin, moves, _timeout(args))
    return 0


# Not created on its broker yet (a replica the reassignment adds): the broker remembers the dir
# for its creation, and the move counts as started once the replica exists.
_REPLICA_PENDING = (ErrorCode.REPLICA_NOT_AVAILABLE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
LOG_DIR_MOVE_RETRY_S = 0.1  # Kafka's executeMoves sleeps 100 ms between attempts


async def _execute_log_dir_moves(admin: AdminClient, moves: Mapping[tuple[TP, int], str],
                                 timeout_ms: int) -> None:
    """Kafka's executeMoves: AlterReplicaLogDirs to each broker after the reassignment has
    started, again for the replicas not created yet, until ``timeout_ms``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_ms / 1000
    pending = dict(moves)
    while True:
        by_broker: dict[int, dict[TP, str]] = {}
        for (tp, b), d in pending.items():
            by_broker.setdefault(b, {})[tp] = d
        done = []
        for b, parts in sorted(by_broker.items()):
            try:
                results = await admin.alter_replica_log_dirs(b, parts)
            except KafkaError as e:
                if e.error_code != ErrorCode.BROKER_NOT_AVAILABLE:
                    raise
                continue  # not alive yet: retried until the timeout
            for tp, err in results.items():
                if err is None:
                    done.append((tp, b))
                elif err.error_code not in _REPLICA_PENDING:
                    raise ReplogError(f"Failed to alter dir for {replica_name(tp, b)}: {err}")
        if done:
            print(log_dir_moves_message(done))
        for key in done:
            pending.pop(key, None)
        if not pending:
            return
        if loop.time() >= deadline:
            raise ReplogError(f"Timed out before log directory move{plural(len(pending))} "
                              f"could be started for: "
                              f"{','.join(replica_name(tp, b) for tp, b in sorted(pending))}")
        await asyncio.sleep(LOG_DIR_MOVE_RETRY_S)  # a retry backoff, as Kafka's


async def _progress(admin: AdminClient, ongoing: Mapping[TP, PartitionReassignment]
                    ) -> dict[TP, list[str]]:
    """Per partition in progress, one line per adding replica. Best effort: a broker that
    does not answer makes its numbers unknown, never fails --verify."""
    if not ongoing:
        return {}
    infos = await _topics(admin, (t for t, _ in ongoing))
    leaders = {tp: (infos[tp[0]].partition(tp[1]).leader
                    if infos[tp[0]].partition(tp[1]) is not None else -1) for tp in ongoing}
    wanted: dict[int, set[TP]] = {}
    for tp, r in ongoing.items():
        for b in [*r.adding_replicas, leaders[tp]]:
            if b >= 0:
                wanted.setdefault(b, set()).add(tp)

    async def ask(b: int, tps: set[TP]):
        try:
            return b, *await asyncio.wait_for(asyncio.gather(
                admin.replica_log_end_offsets(b, tps), admin.replica_sizes(b, tps)),
                PROGRESS_TIMEOUT_S)
        except (TimeoutError, KafkaError):
            return b, {}, {}

    answers = {b: (leos, sizes) for b, leos, sizes in
               await asyncio.gather(*(ask(b, tps) for b, tps in sorted(wanted.items())))}
    out: dict[TP, list[str]] = {}
    for tp, r in ongoing.items():
        leader = leaders[tp]
        lleos, lsizes = answers.get(leader, ({}, {}))
        for b in r.adding_replicas:
            leos, sizes = answers.get(b, ({}, {}))
            out.setdefault(tp, []).append(progress_line(
                b, leader, leos.get(tp), lleos.get(tp), sizes.get(tp), lsizes.get(tp)))
    return out


async def _verify(admin: AdminClient, args) -> int:
    targets = parse_reassignment(read_json_file(args.reassignment_json_file))
    current = await current_replicas(admin, targets)
    ongoing = await admin.list_partition_reassignments(targets)
    ongoing = {tp: r for tp, r in ongoing.items() if tp in targets}
    states = reassignment_states(targets, ongoing, current)
    sys.stdout.write("\n".join(verify_lines(states, await _progress(admin, ongoing))) + "\n")
    moves = await _log_dir_moves(admin, parse_log_dirs(read_json_file(args.reassignment_json_file)))
    if moves:
        sys.stdout.write("\n" + "\n".join(log_dir_move_lines(moves)) + "\n")
    moving = any(not m.done for m in moves.values())
    if not ongoing and not moving and not args.preserve_throttles:
        # Kafka clears every throttle once nothing of the file is moving: it cannot know
        # which source brokers earlier moves throttled.
        await clear_all_throttles(admin, targets)
    return 0


async def _cancel(admin: AdminClient, args) -> int:
    targets = parse_reassignment(read_json_file(args.reassignment_json_file))
    await current_replicas(admin, targets)  # an unknown topic or partition is an error
    ongoing = await admin.list_partition_reassignments(targets)
    # Kafka's cancelAssignment cancels only what is running, so a partition that finished
    # meanwhile is not an error.
    running = sorted(tp for tp, r in ongoing.items()
                     if tp in targets and (r.adding_replicas or r.removing_replicas))
    if running:
        results = await admin.alter_partition_reassignments(
            {tp: None for tp in running}, timeout_ms=_timeout(args))
        if _fail(results):
            return 1
    print(cancelled_message(running))
    # Kafka's cancelAssignment: a log dir move under way is cancelled by asking for the
    # replica's current dir (the broker drops the future replica).
    moves = await _log_dir_moves(admin, parse_log_dirs(read_json_file(args.reassignment_json_file)))
    active = {r: m.current for r, m in moves.items() if m.kind == "active"}
    failed = False
    for b in sorted({b for _, b in active}):
        results = await admin.alter_replica_log_dirs(
            b, {tp: d for (tp, rb), d in active.items() if rb == b})
        for tp, e in sorted(results.items()):
            if e is not None:
                print(f"Error cancelling the log directory move of {replica_name(tp, b)}: "
                      f"{e}", file=sys.stderr)
                failed = True
    if moves:
        print(cancelled_moves_message(active))
    if failed:
        return 1
    if not args.preserve_throttles:
        await clear_all_throttles(admin, targets)
    return 0


async def _log_dir_moves(admin: AdminClient, targets: Mapping[tuple[TP, int], str]
                         ) -> dict[tuple[TP, int], LogDirMove]:
    """The state of each replica move the file names (DescribeLogDirs of its brokers)."""
    if not targets:
        return {}
    brokers = sorted({b for _, b in targets})
    live = await admin.live_brokers()
    answers = await admin.describe_log_dirs([b for b in brokers if b in live])
    out: dict[tuple[TP, int], LogDirMove] = {}
    for (tp, b), target in targets.items():
        current = future = None
        offline = b not in answers
        for d in answers[b].results if b in answers else ():
            offline |= d.error_code != 0
            for t in d.topics:
                for p in t.partitions:
                    if (t.topic, p.partition) == tp:
                        if p.is_future:
                            future = d.log_dir
                        else:
                            current = d.log_dir
        out[(tp, b)] = log_dir_move(target, current, future, offline)
    return out


async def _list(admin: AdminClient, args) -> int:
    sys.stdout.write("\n".join(list_lines(await admin.list_partition_reassignments())) + "\n")
    return 0


ACTION_FUNCS = {"generate": _generate, "execute": execute, "verify": _verify,
                "cancel": _cancel, "list": _list}


async def run(args) -> int:
    action = check_args(args)
    try:
        async with AdminClient(args.bootstrap_server,
                               default_api_timeout_ms=args.timeout_ms) as admin:
            return await ACTION_FUNCS[action](admin, args)
    except KafkaError as e:
        raise ReplogError(str(e)) from None
