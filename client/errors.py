"""Errors a client sees, named by Kafka's error codes.

Every failure the client library raises is a :class:`KafkaError` (a ReplogError, so the CLI
prints it as one ``Error: ...`` line) whose ``error_code`` is Kafka's numeric code and whose
``name`` is Kafka's error name (``NOT_ENOUGH_REPLICAS``), so a caller can branch on the code and
a person reading the message sees the Kafka error.

Two sources, one mapping (proto convention 1):

- per-partition results carry ``error_code`` in the response body;
- whole-request failures are gRPC status codes with the Kafka code in the trailing metadata key
  ``replog-error-code``; a transport failure (broker down, connection refused, deadline) has no
  Kafka code and becomes :class:`TransportError`, which is retriable.

Which codes are retriable follows Kafka's ``RetriableException`` subclasses; which of them mean
"the client's metadata is stale" follows ``InvalidMetadataException``.
"""

from __future__ import annotations

import grpc

from common.errors import ErrorCode, ReplogError
from common.rpc_status import ERROR_CODE_KEY, error_code_of

# Kafka's RetriableException subclasses among the codes replog uses.
RETRIABLE_CODES = frozenset({
    ErrorCode.CORRUPT_MESSAGE,  # Kafka retries it: the batch may have been damaged in transit
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.BROKER_NOT_AVAILABLE,
    ErrorCode.REPLICA_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ErrorCode.NOT_CONTROLLER,
    ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.OFFSET_NOT_AVAILABLE,
    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
})

# Kafka's InvalidMetadataException subclasses: the leader the client used is not (or no longer)
# the leader, so refresh metadata before retrying.
METADATA_STALE_CODES = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.BROKER_NOT_AVAILABLE,
    ErrorCode.REPLICA_NOT_AVAILABLE,
    ErrorCode.NOT_CONTROLLER,
    ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH,
})

ERROR_CODE_METADATA_KEY = ERROR_CODE_KEY


def error_name(code: int) -> str:
    """Kafka's name for ``code`` (``UNKNOWN_ERROR_<n>`` for a code replog does not know)."""
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"UNKNOWN_ERROR_{code}"


class KafkaError(ReplogError):
    """A Kafka error code with context. ``str()`` is ``NAME: message`` (or just NAME)."""

    def __init__(self, code: int, message: str = "", *, topic: str | None = None,
                 partition: int | None = None):
        self.error_code = code  # type: ignore[assignment]  # instance value shadows the class one
        self.name = error_name(code)
        self.message = message
        self.topic = topic
        self.partition = partition
        super().__init__(f"{self.name}: {message}" if message else self.name)

    @property
    def retriable(self) -> bool:
        return self.error_code in RETRIABLE_CODES

    @property
    def invalidates_metadata(self) -> bool:
        return self.error_code in METADATA_STALE_CODES


class TransportError(KafkaError):
    """The RPC did not reach a server or got no answer (connection refused, reset, deadline).

    Retriable, and the target may be down, so metadata is refreshed before the retry. Its code
    is REQUEST_TIMED_OUT for a deadline and BROKER_NOT_AVAILABLE otherwise.
    """

    def __init__(self, address: str, status: grpc.StatusCode | None, details: str = ""):
        self.address = address
        self.status = status
        code = (ErrorCode.REQUEST_TIMED_OUT if status == grpc.StatusCode.DEADLINE_EXCEEDED
                else ErrorCode.BROKER_NOT_AVAILABLE)
        what = status.name if status is not None else "transport error"
        super().__init__(code, f"{address}: {what}" + (f" ({details})" if details else ""))

    @property
    def retriable(self) -> bool:
        return True

    @property
    def invalidates_metadata(self) -> bool:
        return True


class KafkaTimeoutError(KafkaError):
    """Kafka's TimeoutException: an operation ran out of time (delivery.timeout.ms,
    max.block.ms, request.timeout.ms). ``last_error`` is the error of the last attempt, if any."""

    def __init__(self, message: str, last_error: BaseException | None = None, *,
                 topic: str | None = None, partition: int | None = None):
        self.last_error = last_error
        if last_error is not None:
            message = f"{message} (last error: {last_error})"
        super().__init__(ErrorCode.REQUEST_TIMED_OUT, message, topic=topic, partition=partition)

    def __str__(self) -> str:  # Kafka prints TimeoutException messages without an error name
        return self.message


class UnknownTopicError(KafkaError):
    """The topic does not exist (or its metadata never reached the brokers in time)."""

    def __init__(self, topic: str, message: str):
        super().__init__(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, message, topic=topic)

    def __str__(self) -> str:
        return self.message


class RecordTooLargeError(KafkaError):
    def __init__(self, message: str):
        super().__init__(ErrorCode.MESSAGE_TOO_LARGE, message)

    def __str__(self) -> str:
        return self.message


_TRANSPORT_STATUSES = frozenset({
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.CANCELLED,
    grpc.StatusCode.UNKNOWN,  # e.g. a connection reset mid-call
})


# What gRPC says when the two ends of a connection disagree about TLS: a plaintext client's
# HTTP/2 preface makes a TLS server close the socket; a TLS client's ClientHello answered in
# plaintext is an SSL record of a wrong version.
_PLAINTEXT_TO_SSL = "Socket closed"
_SSL_TO_PLAINTEXT = "WRONG_VERSION_NUMBER"


def tls_mismatch_hint(message: str, client_tls: bool) -> str:
    """A short hint to append to a connection failure's one line when it looks like a client
    and a listener that disagree about TLS ("" when it does not)."""
    if not client_tls and _PLAINTEXT_TO_SSL in message:
        return " (is the listener SSL? pass --command-config with security.protocol=SSL)"
    if client_tls and _SSL_TO_PLAINTEXT in message:
        return (" (is the listener PLAINTEXT? --command-config asks for "
                "security.protocol=SSL)")
    return ""


# The Kafka code a server put in the trailing metadata, if any.
kafka_code_of = error_code_of


def from_rpc_error(err: grpc.RpcError, address: str) -> KafkaError:
    """Translate a failed RPC into a KafkaError (convention 1 of the proto)."""
    status = err.code() if hasattr(err, "code") else None
    details = err.details() if hasattr(err, "details") else ""
    code = kafka_code_of(err)
    if code is not None:
        return KafkaError(code, details or "")
    if status in _TRANSPORT_STATUSES or status is None:
        return TransportError(address, status, details or "")
    if status == grpc.StatusCode.INTERNAL:
        # Without a Kafka code, INTERNAL is grpc.aio's report of a call on a connection that
        # died under it ("Internal error from Core": a broker halting, SIGKILLed): Kafka's
        # client sees a NetworkException there, retriable, and finds the new leader. replog's
        # servers send INTERNAL only with a Kafka code (rpc_status.abort), read above.
        return TransportError(address, status, details or "")
    if status == grpc.StatusCode.INVALID_ARGUMENT:
        return KafkaError(ErrorCode.INVALID_REQUEST, details or "")
    if status == grpc.StatusCode.UNIMPLEMENTED:
        return KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                          f"{address} does not implement this RPC ({details})")
    return KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"{address}: {status.name}: {details}")
