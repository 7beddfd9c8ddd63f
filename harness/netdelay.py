"""A fixed one-way delay on a host's packets: an NFQUEUE listener that holds each queued packet
for ``--delay-ms`` before accepting it.

Kafka deployments put racks milliseconds apart; ``tc netem`` is the usual way to model that,
but this machine's kernel is built without sch_netem (and without the prio/flower/matchall
classifiers a per-destination netem needs), while iptables' NFQUEUE target and nfnetlink_queue
are built in. So a rule in the host's namespace (``iptables -A OUTPUT -d <other rack> -j NFQUEUE
--queue-num N --queue-bypass``, written by harness/hosts.py) hands those packets to this process,
which gives each one its verdict (NF_ACCEPT) ``delay`` after it was queued: the same per-packet
delay netem adds, in order, without reordering (every packet of one queue waits equally long).
``--queue-bypass``: if this process is gone, packets pass undelayed instead of being dropped.

The nfnetlink_queue protocol (linux/netfilter/nfnetlink_queue.h) is small enough to speak
directly over an AF_NETLINK socket: bind the queue (NFQNL_CFG_CMD_BIND), ask for metadata only
(NFQNL_COPY_META: the payload is not needed to delay it), read NFQNL_MSG_PACKET messages (their
NFQA_PACKET_HDR carries the packet id) and answer NFQNL_MSG_VERDICT. No library, no compiler.

Run it inside the namespace whose rule queues the packets (a netlink socket belongs to the
namespace it was made in): ``ip netns exec NS python -m harness.netdelay --queue 1 --delay-ms 5``.
"""

from __future__ import annotations

import argparse
import heapq
import os
import select
import signal
import socket
import struct
import sys
import time

NETLINK_NETFILTER = 12
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET = 0
NFQNL_MSG_VERDICT = 1
NFQNL_MSG_CONFIG = 2
NFQA_PACKET_HDR = 1
NFQA_VERDICT_HDR = 2
NFQA_CFG_CMD = 1
NFQA_CFG_PARAMS = 2
NFQA_CFG_QUEUE_MAXLEN = 3
NFQNL_CFG_CMD_BIND = 1
NFQNL_COPY_META = 1
NLM_F_REQUEST = 1
NLMSG_ERROR = 2
NF_ACCEPT = 1
# A delayed packet sits in the kernel's queue until its verdict: room for a busy link's worth
# of packets in flight (past it the kernel drops them, as a full netem limit would).
QUEUE_MAXLEN = 20000


def _attr(kind: int, payload: bytes) -> bytes:
    length = 4 + len(payload)
    return struct.pack("=HH", length, kind) + payload + b"\0" * (-length % 4)


def _message(msg: int, queue: int, attrs: bytes, seq: int = 0) -> bytes:
    body = struct.pack("=BBH", socket.AF_UNSPEC, 0, socket.htons(queue)) + attrs
    return struct.pack("=IHHII", 16 + len(body), (NFNL_SUBSYS_QUEUE << 8) | msg,
                       NLM_F_REQUEST, seq, 0) + body


def bind_message(queue: int) -> bytes:
    return _message(NFQNL_MSG_CONFIG, queue,
                    _attr(NFQA_CFG_CMD, struct.pack("=BBH", NFQNL_CFG_CMD_BIND, 0, 0)))


def params_message(queue: int) -> bytes:
    return _message(NFQNL_MSG_CONFIG, queue,
                    _attr(NFQA_CFG_PARAMS, struct.pack("!IB", 0, NFQNL_COPY_META))
                    + _attr(NFQA_CFG_QUEUE_MAXLEN, struct.pack("!I", QUEUE_MAXLEN)))


def verdict_message(queue: int, packet_id: int, verdict: int = NF_ACCEPT) -> bytes:
    return _message(NFQNL_MSG_VERDICT, queue,
                    _attr(NFQA_VERDICT_HDR, struct.pack("!II", verdict, packet_id)))


def packet_ids(data: bytes) -> list[int]:
    """The packet ids of the NFQNL_MSG_PACKET messages in one netlink read."""
    ids = []
    off = 0
    while off + 16 <= len(data):
        length, kind = struct.unpack_from("=IH", data, off)
        if length < 16:
            break
        if kind == NLMSG_ERROR:
            errno = -struct.unpack_from("=i", data, off + 16)[0]
            if errno:
                raise OSError(errno, os.strerror(errno))
        elif kind == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
            a = off + 20  # nlmsghdr + nfgenmsg
            end = off + length
            while a + 4 <= end:
                alen, atype = struct.unpack_from("=HH", data, a)
                if alen < 4:
                    break
                if (atype & 0x7FFF) == NFQA_PACKET_HDR:
                    ids.append(struct.unpack_from("!I", data, a + 4)[0])
                a += (alen + 3) & ~3
        off += (length + 3) & ~3
    return ids


def serve(queue: int, delay_s: float, stop: list[bool]) -> None:
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    sock.bind((0, 0))
    sock.send(bind_message(queue))
    sock.send(params_message(queue))
    held: list[tuple[float, int]] = []
    print(f"netdelay: queue {queue}, {delay_s * 1000:g} ms", flush=True)
    while not stop[0]:
        now = time.monotonic()
        while held and held[0][0] <= now:
            _, pid = heapq.heappop(held)
            sock.send(verdict_message(queue, pid))
        timeout = max(0.0, held[0][0] - now) if held else 0.5
        ready, _, _ = select.select([sock], [], [], timeout)
        if ready:
            try:
                data = sock.recv(1 << 16)
            except BlockingIOError:
                continue
            except OSError as e:
                if e.errno == 105:  # ENOBUFS: the kernel dropped messages; keep serving
                    continue
                raise
            due = time.monotonic() + delay_s
            for pid in packet_ids(data):
                heapq.heappush(held, (due, pid))
    for _, pid in held:  # let what is held through on the way out
        sock.send(verdict_message(queue, pid))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m harness.netdelay", description=__doc__.split(
        "\n")[0])
    p.add_argument("--queue", type=int, required=True, help="the NFQUEUE number to serve")
    p.add_argument("--delay-ms", type=float, required=True, help="one-way delay per packet")
    args = p.parse_args(argv)
    if args.delay_ms < 0:
        print("--delay-ms must not be negative", file=sys.stderr)
        return 2
    stop = [False]

    def on_signal(_s, _f):
        stop[0] = True

    for s in (signal.SIGTERM, signal.SIGINT):
        signal.signal(s, on_signal)
    try:
        serve(args.queue, args.delay_ms / 1000.0, stop)
    except OSError as e:
        print(f"netdelay: queue {args.queue}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
