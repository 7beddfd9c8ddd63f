"""Every unary RPC of the Broker and Controller services, against a real one-broker cluster,
with each field of a request set, one at a time, to a hostile value: negative and extreme
int32/int64 ids, counts and timeouts, an enum value no version defines, empty, illegal and
overlong names. The answer must be a status with a message (INVALID_ARGUMENT,
FAILED_PRECONDITION, ...) or per-item Kafka error codes - never INTERNAL or UNKNOWN (an
unhandled exception in a handler) - and the cluster must still serve afterwards.

The requests are generated from the service descriptors, so a new RPC or field is probed
without a change here. REPLOG_FUZZ_EXAMPLES does not apply: the probe is exhaustive over
fields x hostile values.
"""
from __future__ import annotations

import asyncio
from collections import Counter

import grpc
import grpc.aio
import pytest
from google.protobuf.descriptor import FieldDescriptor

from common.rpc import replog_pb2 as pb
from tests.kafka import test_wire
from tests.kafka.test_clients import TOPIC

module_cluster = test_wire.module_cluster  # the one-broker cluster (topic TOPIC), shared

pytestmark = pytest.mark.integration

_INT = FieldDescriptor.CPPTYPE_INT32, FieldDescriptor.CPPTYPE_INT64
HOSTILE_INTS = {FieldDescriptor.CPPTYPE_INT32: (-1, -2**31, 2**31 - 1),
                FieldDescriptor.CPPTYPE_INT64: (-1, -2**63, 2**63 - 1)}
HOSTILE_STRINGS = ("", "../../etc", "a b", "x" * 300, "\x00")
HOSTILE_BYTES = (b"", b"\xff" * 70, b"\x00" * 61)  # 61: a record batch header's size
UNKNOWN_ENUM = 9999
# Fields whose extreme value asks the server, legitimately, to wait that long: bounded here
# by the call's deadline, and not probed with the largest value.
_WAITS = {"timeout_ms", "max_wait_ms"}
_DEADLINE_S = 5.0
SKIP = {"ProduceStream", "FetchStream"}
_BROKER = 1  # the cluster's one broker: lists of broker ids name it, lists of partitions 0
_BROKER_LISTS = {"replicas", "isr", "broker_ids", "eligible_leader_replicas", "elr",
                 "last_known_elr", "adding_replicas", "removing_replicas", "new_isr"}  # streams: their messages are the unary ones'


def _base(desc, topic: str, depth: int = 0):
    """A request naming ``topic`` partition 0 wherever it names one, with every repeated
    message field holding one element (so nested fields are reached)."""
    msg = pb.__dict__[desc.name]() if desc.name in pb.__dict__ else None
    if msg is None:
        return None
    _fill(msg, topic, depth)
    return msg


def _fill(msg, topic: str, depth: int) -> None:
    for f in msg.DESCRIPTOR.fields:
        if f.cpp_type == FieldDescriptor.CPPTYPE_MESSAGE and depth < 3:
            if f.is_repeated:
                if not f.message_type.GetOptions().map_entry:
                    _fill(getattr(msg, f.name).add(), topic, depth + 1)
            else:
                _fill(getattr(msg, f.name), topic, depth + 1)
        elif f.cpp_type == FieldDescriptor.CPPTYPE_STRING and not f.is_repeated \
                and f.name in ("topic", "name", "resource_name"):
            setattr(msg, f.name, topic)
        elif f.cpp_type == FieldDescriptor.CPPTYPE_STRING and f.is_repeated \
                and f.name in ("topics", "topic_names"):
            getattr(msg, f.name).append(topic)
        elif f.cpp_type in HOSTILE_INTS and f.is_repeated:
            getattr(msg, f.name).append(_BROKER if f.name in _BROKER_LISTS else 0)


def _mutations(msg):
    """(path, value, mutated copy) for each scalar field reachable in ``msg``."""
    def walk(m, path):
        for f in m.DESCRIPTOR.fields:
            if f.cpp_type == FieldDescriptor.CPPTYPE_MESSAGE:
                if f.is_repeated:
                    for i, sub in enumerate(getattr(m, f.name)):
                        if not f.message_type.GetOptions().map_entry:
                            yield from walk(sub, path + ((f.name, i),))
                else:
                    yield from walk(getattr(m, f.name), path + ((f.name, None),))
            else:
                yield path, f

    for path, f in list(walk(msg, ())):
        if f.cpp_type in HOSTILE_INTS:
            values = HOSTILE_INTS[f.cpp_type]
            if f.name in _WAITS:
                values = values[:2]
        elif f.type == FieldDescriptor.TYPE_BYTES:
            values = HOSTILE_BYTES
        elif f.cpp_type == FieldDescriptor.CPPTYPE_STRING:
            values = HOSTILE_STRINGS
        elif f.cpp_type == FieldDescriptor.CPPTYPE_ENUM:
            values = (UNKNOWN_ENUM, -1)
        else:
            continue
        for v in values:
            m = type(msg)()
            m.CopyFrom(msg)
            target = m
            for name, i in path:
                target = getattr(target, name)[i] if i is not None else getattr(target, name)
            field = getattr(target, f.name) if f.is_repeated else None
            if field is not None:
                del field[:]
                field.append(v)
            else:
                setattr(target, f.name, v)
            yield "/".join(n for n, _ in path) + "/" + f.name, v, m


async def _probe(address: str, service: str, topic: str) -> tuple[Counter, list[str]]:
    svc = pb.DESCRIPTOR.services_by_name[service]
    codes: Counter = Counter()
    bad: list[str] = []
    async with grpc.aio.insecure_channel(address) as ch:
        for method in svc.methods:
            if method.name in SKIP or method.client_streaming or method.server_streaming:
                continue
            base = _base(method.input_type, topic)
            out_cls = pb.__dict__[method.output_type.name]
            call = ch.unary_unary(f"/{svc.full_name}/{method.name}",
                                  request_serializer=type(base).SerializeToString,
                                  response_deserializer=out_cls.FromString)
            for path, value, req in _mutations(base):
                try:
                    await call(req, timeout=_DEADLINE_S)
                    code = grpc.StatusCode.OK
                except grpc.aio.AioRpcError as e:
                    code = e.code()
                    if code in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN) or \
                            (code != grpc.StatusCode.DEADLINE_EXCEEDED and not e.details()):
                        bad.append(f"{service}.{method.name} {path}={value!r:.30}: "
                                   f"{code.name} {e.details()!r:.200}")
                codes[code.name] += 1
    return codes, bad


def _serving(cluster) -> None:
    async def go():
        async with grpc.aio.insecure_channel(cluster.broker(1).address) as ch:
            call = ch.unary_unary("/replog.v1.Broker/Metadata",
                                  request_serializer=pb.MetadataRequest.SerializeToString,
                                  response_deserializer=pb.MetadataResponse.FromString)
            return await call(pb.MetadataRequest(all_topics=True), timeout=10)
    assert asyncio.run(go()).brokers


@pytest.mark.parametrize("service", ["Broker", "Controller"])
def test_hostile_fields_get_a_status_or_an_error_code_never_an_internal_error(
        module_cluster, service):
    address = (module_cluster.broker(1).address if service == "Broker"
               else next(iter(module_cluster.controllers.values())).address)
    codes, bad = asyncio.run(_probe(address, service, TOPIC))
    print(f"{service}: {dict(codes)}")
    _serving(module_cluster)
    assert not bad, "\n".join(bad)
