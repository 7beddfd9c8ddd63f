"""Compose healthcheck of docker-compose.mtls.yml: the gRPC health service of a replog broker
or controller answers SERVING over mutual TLS, the check presenting the process's own
certificate (its listeners require one: ssl.client.auth=required).
Usage: healthcheck-tls.py HOST:PORT KEYSTORE TRUSTSTORE; exit 0 when serving."""

import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from common.security.tls import SslChannelFactory, SslConfigError, SslSettings

target, keystore, truststore = sys.argv[1:4]
try:
    factory = SslChannelFactory(SslSettings(keystore_location=keystore,
                                            truststore_location=truststore))
    with factory.blocking(target) as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(),
                                                          timeout=3)
except SslConfigError as e:
    sys.exit(f"health check failed: {e}")
except grpc.RpcError as e:
    sys.exit(f"health check failed: {e.code().name}")
sys.exit(0 if reply.status == health_pb2.HealthCheckResponse.SERVING else 1)
