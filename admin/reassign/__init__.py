"""``replog reassign`` — kafka-reassign-partitions.sh, over replog's gRPC.

Options, JSON and messages are Kafka's ReassignPartitionsCommand (Kafka 3.x,
``--bootstrap-server`` mode); the action is a flag as in Kafka (``--generate``, ``--execute``,
``--verify``, ``--cancel``, ``--list``) or, equivalently, a positional word
(``replog reassign execute ...``):

    replog reassign --bootstrap-server H:P --generate --topics-to-move-json-file topics.json \\
        --broker-list 1,2,3
    replog reassign --bootstrap-server H:P --execute --reassignment-json-file plan.json \\
        [--throttle 1048576] [--additional]
    replog reassign --bootstrap-server H:P --verify --reassignment-json-file plan.json
    replog reassign --bootstrap-server H:P --cancel --reassignment-json-file plan.json
    replog reassign --bootstrap-server H:P --list

Everything a file or an option can get wrong (malformed JSON, missing fields, duplicate
partitions or replicas, an unknown topic or partition, a broker that is not alive) is checked
before the first change, and reported as one ``Error:`` line with exit status 1. Throttles are
set as Kafka's tool sets them, through IncrementalAlterConfigs (broker
``*.replication.throttled.rate``, topic ``*.replication.throttled.replicas``); if the controller
then refuses the reassignment, the throttle configs are put back as they were, so a refused
``--execute`` changes nothing (Kafka's tool leaves them set). ``--verify`` adds a progress line
per adding replica (log end offset and bytes against the leader's), which Kafka's tool does not
print.

The package, in the order a request goes through it: ``parsing`` (options, JSON files, partition
names), ``planning`` (what a plan means against the cluster as it is), ``throttles`` (KIP-73's
configs, set and cleared), ``messages`` (Kafka's output, word for word) and ``actions`` (the
five actions against a cluster); this module holds the command line.
"""

from __future__ import annotations

from admin import options
from admin.reassign.actions import run
from admin.reassign.parsing import ACTIONS
from common import event_loop


def add_parsers(sub) -> None:
    p = sub.add_parser("reassign", parents=[options.client()],
                       help="move partition replicas between brokers "
                            "(kafka-reassign-partitions)")
    p.add_argument("action", nargs="?", choices=ACTIONS,
                   help="the action, as a word instead of its flag")
    for a, text in (("generate", "propose an assignment of --topics-to-move-json-file's topics "
                                 "over --broker-list"),
                    ("execute", "start the reassignment of --reassignment-json-file"),
                    ("verify", "show whether the reassignment of --reassignment-json-file is "
                               "done, and clear the throttles once it is"),
                    ("cancel", "cancel the running reassignments of --reassignment-json-file"),
                    ("list", "list the reassignments in progress")):
        p.add_argument(f"--{a}", dest=f"{a}_flag", action="store_true", help=text)
    p.add_argument("--reassignment-json-file", metavar="FILE",
                   help='{"version":1,"partitions":[{"topic":"foo","partition":0,'
                        '"replicas":[1,2,3]}]}')
    p.add_argument("--topics-to-move-json-file", metavar="FILE",
                   help='{"version":1,"topics":[{"topic":"foo"}]}')
    p.add_argument("--broker-list", metavar="1,2,3", help="brokers to assign to (--generate)")
    p.add_argument("--disable-rack-aware", action="store_true",
                   help="ignore racks when generating an assignment")
    p.add_argument("--additional", action="store_true",
                   help="execute while other reassignments are running")
    p.add_argument("--throttle", type=int, metavar="BYTES_PER_SEC",
                   help="inter-broker replication throttle for the move")
    p.add_argument("--replica-alter-log-dirs-throttle", type=int, metavar="BYTES_PER_SEC",
                   help="throttle of moves between log dirs of one broker")
    p.add_argument("--preserve-throttles", action="store_true",
                   help="do not clear the throttles (--verify, --cancel)")
    p.add_argument("--timeout", type=int, metavar="MS",
                   help="server-side timeout of the reassignment request (default 10000)")
    p.add_argument("--timeout-ms", type=int, default=60000,
                   help="give up after this long (default.api.timeout.ms)")
    p.set_defaults(func=lambda args: event_loop.run(run(args)))
