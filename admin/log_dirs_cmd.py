"""``replog log-dirs describe`` — kafka-log-dirs.sh (Kafka's LogDirsCommand), over replog's
DescribeLogDirs RPC (KIP-113).

    replog log-dirs describe --bootstrap-server H:P [--broker-list 1,2] [--topic-list t,u]
    Querying brokers for log directories information
    Received log directory information from brokers 1,2
    {"version":1,"brokers":[{"broker":1,"logDirs":[{"logDir":"/d0","error":null,
      "partitions":[{"partition":"t-0","size":1024,"offsetLag":0,"isFuture":false}]}]}]}

Kafka's ``--describe`` flag is accepted as well as the ``describe`` word. The JSON line is
Kafka's exactly: one object per broker, one per log dir in log.dirs order, an offline dir
(design.md#jbod) with Kafka's storage exception class as its ``error`` and no partitions. Unknown
brokers in ``--broker-list`` are refused with Kafka's message, naming the existing ones.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping

from admin import options
from common.errors import ErrorCode, ReplogError
from common.rpc import replog_pb2 as pb

# What Kafka's tool prints for a dir whose DescribeLogDirs error is KAFKA_STORAGE_ERROR: the
# exception class name (LogDirsCommand maps the error to its exception's class).
STORAGE_ERROR = "org.apache.kafka.common.errors.KafkaStorageException"


def parse_list(text: str | None, what: str, convert=str) -> list | None:
    """Kafka's comma-separated option values; None when the option was not given."""
    if text is None:
        return None
    items = [x.strip() for x in text.split(",") if x.strip()]
    if not items:
        raise ReplogError(f"--{what} is empty")
    try:
        return [convert(x) for x in items]
    except ValueError:
        raise ReplogError(f"--{what} must be a comma-separated list of broker ids, "
                          f"not {text!r}") from None


def _error_name(code: int) -> str | None:
    if code == ErrorCode.NONE:
        return None
    if code == ErrorCode.KAFKA_STORAGE_ERROR:
        return STORAGE_ERROR
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


def describe_json(responses: Mapping[int, pb.DescribeLogDirsResponse],
                  topics: Iterable[str] | None = None) -> dict:
    """Kafka's LogDirsCommand JSON for the brokers' answers, partitions of `topics` only
    (all when None)."""
    wanted = None if topics is None else set(topics)
    brokers = []
    for broker, resp in sorted(responses.items()):
        dirs = []
        for r in resp.results:
            parts = sorted(((t.topic, p) for t in r.topics for p in t.partitions
                            if wanted is None or t.topic in wanted),
                           key=lambda tp: (tp[0], tp[1].partition, tp[1].is_future))
            dirs.append({"logDir": r.log_dir, "error": _error_name(r.error_code),
                         "partitions": [{"partition": f"{t}-{p.partition}", "size": p.size,
                                         "offsetLag": p.offset_lag, "isFuture": p.is_future}
                                        for t, p in parts]})
        brokers.append({"broker": broker, "logDirs": dirs})
    return {"version": 1, "brokers": brokers}


async def _run(args) -> int:
    if not args.describe:
        raise ReplogError("Command must include exactly one action: --describe")
    broker_ids = parse_list(args.broker_list, "broker-list", int)
    topics = parse_list(args.topic_list, "topic-list")
    async with options.admin_client(args, args.timeout_ms) as admin:
        live = sorted(await admin.live_brokers())
        if broker_ids is not None:
            missing = sorted(set(broker_ids) - set(live))
            if missing:
                raise ReplogError(
                    f"The given brokers do not exist from --broker-list: "
                    f"{','.join(map(str, missing))}. Current existent brokers: "
                    f"{','.join(map(str, live))}")
        ids = live if broker_ids is None else sorted(set(broker_ids))
        print("Querying brokers for log directories information", flush=True)
        responses = await admin.describe_log_dirs(ids)
    print(f"Received log directory information from brokers {','.join(map(str, ids))}")
    sys.stdout.write(json.dumps(describe_json(responses, topics), separators=(",", ":"))
                     + "\n")
    return 0


def add_parsers(sub) -> None:
    p = sub.add_parser("log-dirs", parents=[options.client()],
                       help="describe brokers' log dirs and the replicas in them "
                            "(kafka-log-dirs)")
    p.add_argument("action", nargs="?", choices=["describe"],
                   help="describe (Kafka's --describe)")
    p.add_argument("--describe", dest="describe_flag", action="store_true",
                   help="same as the describe action")
    p.add_argument("--broker-list", metavar="1,2",
                   help="brokers to query (default: every live broker)")
    p.add_argument("--topic-list", metavar="T1,T2",
                   help="only these topics' partitions (default: all)")
    p.add_argument("--timeout-ms", type=int, default=60000,
                   help="give up after this long (default.api.timeout.ms)")

    def run(args) -> int:
        args.describe = args.action == "describe" or args.describe_flag
        return options.run_async(_run)(args)
    p.set_defaults(func=run)
