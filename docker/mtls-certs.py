"""The secure compose cluster's one-shot ``certs`` service (docker-compose.mtls.yml): makes the
CA, each process's keystore, the ZooKeeper digest credentials and the admin's client material
(harness/cluster_security.py, the same as ``replog cluster up --security mtls``), or issues one
more client's.

  mtls-certs.py init --data-dir /etc/replog --hosts zookeeper-1,...,broker-3 --client-dir DIR
  mtls-certs.py client --data-dir /etc/replog --cn alice --client-dir DIR

Server material goes to DATA_DIR/ssl (the ``ssl`` volume); DIR (bind-mounted from the host)
gets client properties with the key material inline, so they work on the host as they are:
``client.properties`` (User:admin) from init, ``<cn>.properties`` (User:<cn>) from client.
Bad input: one line on stderr, exit 2."""

import argparse
import sys
from pathlib import Path

from common.security.tls import SslConfigError
from harness.cluster_security import init_compose, issue_inline_client

parser = argparse.ArgumentParser(prog="mtls-certs.py")
actions = parser.add_subparsers(dest="action", required=True)
init = actions.add_parser("init", help="the CA, every process's keystore, admin's client")
init.add_argument("--hosts", required=True,
                  help="the compose services that get a keystore, comma-separated")
client = actions.add_parser("client", help="one more client certificate (User:CN)")
client.add_argument("--cn", required=True)
for p in (init, client):
    p.add_argument("--data-dir", required=True)
    p.add_argument("--client-dir", required=True)
args = parser.parse_args()
try:
    if args.action == "init":
        hosts = tuple(args.hosts.split(","))
        for path in init_compose(args.data_dir, hosts, args.client_dir):
            print(path)
    else:
        print(issue_inline_client(args.data_dir, args.cn,
                                  Path(args.client_dir) / f"{args.cn}.properties"))
except (ValueError, OSError, SslConfigError) as e:
    sys.exit(f"mtls-certs.py: {e}")
