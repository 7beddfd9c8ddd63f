"""Compose healthcheck: the gRPC health service of a replog broker or controller answers
SERVING ("" service: the process is up; a standby controller is healthy too).
Usage: healthcheck.py HOST:PORT; exit 0 when serving."""

import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

with grpc.insecure_channel(sys.argv[1]) as channel:
    try:
        reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(),
                                                          timeout=3)
    except grpc.RpcError as e:
        sys.exit(f"health check failed: {e.code().name}")
sys.exit(0 if reply.status == health_pb2.HealthCheckResponse.SERVING else 1)
