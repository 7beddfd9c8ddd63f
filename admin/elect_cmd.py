"""``replog elect`` — kafka-leader-election.sh, over replog's gRPC (ElectLeaders, KIP-460).

Options, JSON and messages are Kafka's LeaderElectionCommand:

    replog elect --bootstrap-server H:P --election-type preferred --all-topic-partitions
    Successfully completed leader election (PREFERRED) for partitions foo-0, foo-2
    Valid replica already elected for partitions foo-1

The partitions are exactly one of ``--topic T --partition N``, ``--all-topic-partitions`` or
``--path-to-json-file F`` (``{"partitions":[{"topic":"foo","partition":1}]}``). A partition
the election failed for is printed as ``Error completing leader election (PREFERRED) for
partition: foo-3: <error>``, and the command then exits 1 with one ``Error:`` line naming how
many failed, as Kafka's tool does.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping

from admin import options
from admin.reassign.parsing import read_json_file
from client import KafkaError
from common.errors import ErrorCode, ReplogError

TP = tuple[str, int]
ELECTION_TYPES = ("PREFERRED", "UNCLEAN")
EXCLUSIVE = ("topic", "all-topic-partitions", "path-to-json-file")


def _names(tps: Iterable[TP]) -> str:
    return ", ".join(f"{t}-{p}" for t, p in sorted(tps))


def parse_election_type(text: str) -> str:
    """Kafka's ElectionType converter: case-insensitive PREFERRED or UNCLEAN."""
    value = text.strip().upper()
    if value not in ELECTION_TYPES:
        raise ReplogError(f"Invalid election type {text!r}: must be one of "
                          f"{', '.join(ELECTION_TYPES)} (case-insensitive)")
    return value


def check_args(args) -> str:
    """The election type, or a ReplogError with Kafka's message for misused options."""
    if args.election_type is None:
        raise ReplogError("Missing required option(s): [election-type]")
    election_type = parse_election_type(args.election_type)
    given = [args.topic is not None, args.all_topic_partitions,
             args.path_to_json_file is not None]
    if sum(given) != 1:
        raise ReplogError("One and only one of the following options is required: "
                          + ", ".join(f"[{o}]" for o in EXCLUSIVE))
    if args.topic is not None and args.partition is None:
        raise ReplogError("Missing required option(s): [partition]")
    if args.topic is None and args.partition is not None:
        raise ReplogError("Option [partition] is only allowed if [topic] is used")
    if args.partition is not None and args.partition < 0:
        raise ReplogError(f"The partition must be a non-negative integer, not {args.partition}")
    return election_type


def parse_election_json(text: str) -> list[TP]:
    """Kafka's parseReplicaElectionData: ``{"partitions":[{"topic":"foo","partition":1}]}``."""
    try:
        data = json.loads(text)
    except ValueError as e:
        raise ReplogError(f"The replica election JSON file is not valid JSON: {e}") from None
    except RecursionError:
        raise ReplogError("The replica election JSON file is nested too deeply to be read"
                          ) from None
    if not isinstance(data, dict) or not isinstance(data.get("partitions"), list):
        raise ReplogError('Replica election data is missing "partitions" field')
    out: list[TP] = []
    for i, entry in enumerate(data["partitions"]):
        topic = entry.get("topic") if isinstance(entry, dict) else None
        partition = entry.get("partition") if isinstance(entry, dict) else None
        if not isinstance(topic, str) or not topic:
            raise ReplogError(f"Entry {i} of partitions needs a string \"topic\"")
        if not isinstance(partition, int) or isinstance(partition, bool) or \
                not 0 <= partition <= 2**31 - 1:  # an int32 in the request
            raise ReplogError(f"Entry {i} of partitions needs a non-negative integer "
                              f"\"partition\", not {json.dumps(partition)[:40]}")
        out.append((topic, partition))
    if not out:
        raise ReplogError("Replica election data is empty")
    seen: set[TP] = set()
    dups = sorted({tp for tp in out if tp in seen or seen.add(tp)})
    if dups:
        raise ReplogError(f"Replica election data contains duplicate partitions: "
                          f"{_names(dups).replace(', ', ',')}")
    return out


def result_lines(election_type: str, results: Mapping[TP, KafkaError | None]
                 ) -> tuple[list[str], int]:
    """Kafka's printElectionResults: (lines for stdout, number of failed partitions)."""
    succeeded = [tp for tp, e in results.items() if e is None]
    noop = [tp for tp, e in results.items()
            if e is not None and e.error_code == ErrorCode.ELECTION_NOT_NEEDED]
    failed = sorted((tp, e) for tp, e in results.items()
                    if e is not None and e.error_code != ErrorCode.ELECTION_NOT_NEEDED)
    lines = []
    if succeeded:
        lines.append(f"Successfully completed leader election ({election_type}) for "
                     f"partitions {_names(succeeded)}")
    if noop:
        lines.append(f"Valid replica already elected for partitions {_names(noop)}")
    lines += [f"Error completing leader election ({election_type}) for partition: "
              f"{t}-{p}: {e}" for (t, p), e in failed]
    return lines, len(failed)


async def _run(args) -> int:
    election_type = check_args(args)
    partitions: list[TP] | None
    if args.path_to_json_file is not None:
        partitions = parse_election_json(read_json_file(args.path_to_json_file))
    elif args.topic is not None:
        partitions = [(args.topic, args.partition)]
    else:
        partitions = None  # Kafka's null list: every partition
    async with options.admin_client(args, args.timeout_ms) as admin:
        # The controller waits for the new leaders up to this long (Kafka's ElectLeaders
        # timeout); leave the client's own deadline the margin beyond it.
        results = await admin.elect_leaders(election_type.lower(), partitions,
                                            timeout_ms=min(30000, args.timeout_ms))
    lines, failed = result_lines(election_type, results)
    if lines:
        sys.stdout.write("\n".join(lines) + "\n")
    if failed:
        raise ReplogError(f"{failed} replica(s) could not be elected")
    return 0


def add_parsers(sub) -> None:
    p = sub.add_parser("elect", parents=[options.client()],
                       help="elect preferred or unclean leaders "
                            "(kafka-leader-election)")
    p.add_argument("--election-type", metavar="PREFERRED|UNCLEAN",
                   help="preferred: move leadership to the first replica; unclean: elect an "
                        "out-of-sync replica where no in-sync one is alive")
    p.add_argument("--topic", help="the topic of --partition")
    p.add_argument("--partition", type=int, help="the partition of --topic")
    p.add_argument("--all-topic-partitions", action="store_true",
                   help="every partition of every topic")
    p.add_argument("--path-to-json-file", metavar="FILE",
                   help='{"partitions":[{"topic":"foo","partition":1}]}')
    p.add_argument("--timeout-ms", type=int, default=60000,
                   help="give up after this long (default.api.timeout.ms)")
    p.set_defaults(func=options.run_async(_run))
