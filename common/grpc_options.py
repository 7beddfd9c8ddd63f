"""The gRPC channel and server options of every replog process, in one place.

Four copies of these lists had drifted apart (the replica fetcher, the admin client's channel
pool, the controller's channel to brokers and the controller's server). Each role keeps the
profile it had; what differs between them is stated here, next to why.

- Message size: records travel in Produce and Fetch, so every broker-facing channel and server
  takes up to ``MAX_MESSAGE_BYTES`` (a Fetch response is capped at 64 MiB by the servicer).
  The controller's channel to brokers is unbounded (-1): a LeaderAndIsr or UpdateMetadata for
  tens of thousands of partitions is one message and must never be refused by the sender.
- Reconnect backoff: gRPC's default grows to 120 s, so a peer that died and came back would
  not be noticed for minutes. Clients cap it at 1 s, the controller at 2 s (it retries queued
  requests itself, Kafka's RequestSendThread backoff).
- Keepalive (clients only): detect a peer that vanished without closing (SIGSTOP, network
  partition) on an idle channel.
- No transparent retries for clients: the producer owns retry policy and ordering.

``insecure_channel`` is the default channel factory of the components that open channels
(``ChannelFactory``): tests pass their own to run the same code over another transport, and a
listener mapped to SSL is reached through common/security/tls.py's ``SslChannelFactory``
(``channel_factory_for(config, listener)`` of common/security/listener_security.py in the
processes, ``--command-config`` in the CLI).
The options above apply to TLS channels unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import grpc
import grpc.aio

MAX_MESSAGE_BYTES = 64 * 1024 * 1024

Options = tuple[tuple[str, int], ...]

_MESSAGE_SIZE: Options = (
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
)

# Broker and controller gRPC servers.
SERVER_OPTIONS: Options = _MESSAGE_SIZE
# Kafka's socket.request.max.bytes default: the largest request a server accepts.
DEFAULT_MAX_REQUEST_BYTES = 104857600


def server_options(max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES) -> Options:
    """A server's options with its largest request bounded by ``socket.request.max.bytes``
    (Kafka's SocketServer bound: a larger request is refused, RESOURCE_EXHAUSTED here).
    Responses keep ``MAX_MESSAGE_BYTES``: the servicers cap Fetch at 64 MiB."""
    return (("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_receive_message_length", max_request_bytes))

# A follower's replica fetcher to its leader (Kafka's ReplicaFetcherThread network client).
REPLICA_FETCHER_OPTIONS: Options = _MESSAGE_SIZE

# The controller to each broker (Kafka's ControllerChannelManager).
CONTROLLER_TO_BROKER_OPTIONS: Options = (
    ("grpc.max_send_message_length", -1),
    ("grpc.max_receive_message_length", -1),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 2000),
)

# Producers, consumers and admin clients (client/transport.py).
CLIENT_OPTIONS: Options = _MESSAGE_SIZE + (
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.keepalive_permit_without_calls", 0),
    ("grpc.enable_retries", 0),
)

# (address, options) -> channel: the transport seam of the fetcher and the controller channel.
ChannelFactory = Callable[[str, Sequence[tuple[str, int]]], grpc.aio.Channel]


def insecure_channel(address: str, options: Sequence[tuple[str, int]] = ()) -> grpc.aio.Channel:
    """The real transport: a plaintext grpc.aio channel."""
    return grpc.aio.insecure_channel(address, options=list(options))
