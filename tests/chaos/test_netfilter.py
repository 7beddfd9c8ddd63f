"""chaos/netfilter.py's cut on loopback, with two real processes and a real TCP connection:
a process cut off from a port gets nothing more from it on a connection it had already opened
(a real partition drops both directions), and gets it again after the heal (TCP retransmits).

Before the rule for the other side's packets, ``block`` dropped only what the cut process sent,
so a server's answers (a long-poll fetch completing, a ZooKeeper reply) still reached it."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from chaos import netfilter
from tests.polling import wait_until

pytestmark = pytest.mark.skipif(netfilter.unavailable() is not None,
                                reason=f"nftables cuts: {netfilter.unavailable()}")

# The server: accepts one connection and sends it a byte every 20 ms until it is killed. With
# TCP_NODELAY each byte is a segment of its own even while earlier ones wait for their ACK (a
# gRPC server sets it too), so after a one-way cut it still sends a congestion window's worth.
_SERVER = """
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
print(s.getsockname()[1], flush=True)
c, _ = s.accept()
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
while True:
    c.sendall(b"x"); time.sleep(0.02)
"""

# The client: connects to the port given and prints the bytes received so far after each read.
_CLIENT = """
import socket, sys
c = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
n = 0
while True:
    d = c.recv(4096)
    if not d:
        break
    n += len(d); print(n, flush=True)
"""


class _Counter:
    """The client's running byte count, read from its stdout without blocking the test."""

    def __init__(self, proc: subprocess.Popen):
        self.proc, self.n = proc, 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.n = int(line)


def test_a_cut_process_receives_nothing_on_its_open_connection_until_the_heal():
    server = subprocess.Popen([sys.executable, "-c", _SERVER], stdout=subprocess.PIPE,
                              text=True)
    client = None
    net = netfilter.Netfilter(tag=f"test_netfilter_{server.pid}")
    try:
        port = int(server.stdout.readline())
        client = subprocess.Popen([sys.executable, "-c", _CLIENT, str(port)],
                                  stdout=subprocess.PIPE, text=True)
        got = _Counter(client)
        wait_until(lambda: got.n > 5, what="bytes from the server before the cut")

        net.block("client", client.pid, [port])
        time.sleep(0.1)  # what was already in the client's socket buffer is read meanwhile
        at_cut = got.n
        time.sleep(1.0)  # the server sent ~50 bytes in this second
        assert got.n == at_cut, "the server's bytes still reached the cut process"

        net.heal()
        wait_until(lambda: got.n > at_cut, what="the server's bytes after the heal")
    finally:
        net.heal()
        for p in (client, server):
            if p is not None:
                p.kill()
                p.wait()
