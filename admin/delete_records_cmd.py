"""``replog delete-records`` — kafka-delete-records.sh (Kafka's DeleteRecordsCommand), over the
brokers' DeleteRecords RPC (KIP-107): each partition's log start moves to the offset given, on
its leader, and consumers then start there.

    replog delete-records --bootstrap-server H:P --offset-json-file offsets.json
    Executing records delete operation
    Records delete operation completed:
    partition: t-0	low_watermark: 5
    partition: t-1	error: org.apache.kafka.common.errors.OffsetOutOfRangeException: The ...

The file is Kafka's: ``{"partitions": [{"topic": "t", "partition": 0, "offset": 5}],
"version": 1}`` (offset -1: the high watermark; no version means 1). A partition listed twice,
another version or a malformed file is one line on stderr and exit status 1 before anything
is deleted. A partition's error is Kafka's exception with Kafka's message (its wire answer
carries only the code); the status is still 0, as Kafka's tool's.
"""

from __future__ import annotations

import json

from admin import options
from admin.produce_cmd import java_exception
from client import KafkaError
from common.errors import ReplogError


def parse_offsets(text: str) -> dict[tuple[str, int], int]:
    """Kafka's offset JSON (DeleteRecordsCommand.parseOffsetJsonStringWithoutDedup)."""
    try:
        js = json.loads(text)
    except ValueError:
        raise ReplogError("The input string is not a valid JSON") from None
    if not isinstance(js, dict):
        raise ReplogError("The input string is not a valid JSON object")
    version = js.get("version", 1)
    if version != 1:
        raise ReplogError(f"Not supported version field value {version}")
    if "partitions" not in js:
        raise ReplogError("Missing partitions field")
    seen: dict[tuple[str, int], list[int]] = {}
    try:
        for p in js["partitions"]:
            topic, partition, offset = p["topic"], p["partition"], p["offset"]
            if not isinstance(topic, str) or type(partition) is not int or \
                    type(offset) is not int:
                raise TypeError
            seen.setdefault((topic, partition), []).append(offset)
    except (TypeError, KeyError) as e:
        raise ReplogError(f"Each partition needs a string topic and integer partition and "
                          f"offset{f': missing {e}' if isinstance(e, KeyError) else ''}"
                          ) from None
    dups = sorted(f"{t}-{p}" for (t, p), offsets in seen.items() if len(offsets) > 1)
    if dups:
        raise ReplogError(f"Offset json file contains duplicate topic partitions: "
                          f"{','.join(dups)}")
    return {tp: offsets[0] for tp, offsets in seen.items()}


def report_lines(results: dict[tuple[str, int], int | KafkaError]) -> list[str]:
    out = []
    for (topic, p), r in sorted(results.items()):
        if isinstance(r, KafkaError):
            out.append(f"partition: {topic}-{p}\terror: "
                       f"{java_exception(KafkaError(r.error_code))}")
        else:
            out.append(f"partition: {topic}-{p}\tlow_watermark: {r}")
    return out


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise ReplogError(f"cannot read {path}: {e.strerror or e}") from None


async def _run(args) -> int:
    offsets = parse_offsets(_read(args.offset_json_file))
    print("Executing records delete operation", flush=True)
    async with options.admin_client(args) as admin:
        results = await admin.delete_records(offsets, timeout_ms=args.timeout_ms)
    print("Records delete operation completed:")
    for line in report_lines(results):
        print(line)
    return 0


def add_parsers(sub) -> None:
    p = sub.add_parser("delete-records", parents=[options.client()],
                       help="move partitions' log start offsets forward "
                            "(kafka-delete-records)")
    p.add_argument("--offset-json-file", required=True, metavar="FILE",
                   help='the offset per partition: {"partitions": [{"topic": "foo", '
                        '"partition": 1, "offset": 1}], "version": 1}')
    p.add_argument("--timeout-ms", type=int, default=30000,
                   help="how long each leader waits for its replicas (default 30000)")
    p.set_defaults(func=options.run_async(_run))
