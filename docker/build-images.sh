#!/usr/bin/env bash
# Build the compose cluster's images with no registry but the package ones:
#   1. a Docker engine (docker/start-dockerd.sh starts one as root when none answers);
#   2. the base image: REPLOG_BASE_IMAGE, default replog-base:bookworm, built from Debian's
#      packages by docker/base-image.sh unless it exists (python:3.11-slim where Docker Hub is
#      reachable: set REPLOG_BASE_IMAGE=python:3.11-slim);
#   3. build/docker-wheels: replog's wheel (gRPC stubs included) and its runtime dependencies,
#      at the versions of the virtualenv the tests run with;
#   4. docker-compose build.
# Usage: docker/build-images.sh [PYTHON]   (PYTHON: the venv's python, default .venv/bin/python)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:-.venv/bin/python}
export REPLOG_BASE_IMAGE=${REPLOG_BASE_IMAGE:-replog-base:bookworm}
docker/start-dockerd.sh
if [ "$REPLOG_BASE_IMAGE" = replog-base:bookworm ]; then docker/base-image.sh; fi
rm -rf build/docker-wheels
# A fixed SOURCE_DATE_EPOCH makes the wheel byte-identical while the sources are, so the
# image layer that copies it stays cached.
SOURCE_DATE_EPOCH=315532800 "$PY" -m pip wheel -q --no-deps -w build/docker-wheels . 2>/dev/null
# The broker's and controller's imports only: pyspark and matplotlib serve `replog analyze`,
# which runs on the host against an export. cryptography: common/security/tls.py imports it in
# every process (TLS listeners, docker-compose.mtls.yml's certificates); cffi is its binding.
pins=$("$PY" -m pip freeze | grep -iE '^(grpcio|grpcio-health-checking|protobuf|kazoo|aiofiles|structlog|prometheus[-_]client|crc32c|psutil|uvloop|cryptography|cffi|pycparser)==')
# shellcheck disable=SC2086
"$PY" -m pip download -q --only-binary=:all: -d build/docker-wheels $pins 2>&1 | grep -v "is ignored" || true
# One build per image: compose would build replog:dev once per service that names it.
docker-compose build -q zookeeper-1 controller-1 prometheus 2>&1 | grep -v -e DEPRECATED -e buildx -e docs.docker.com -e "^$" || true
# A rebuild leaves the previous image untagged; vfs keeps each as a full copy (~1 GB), which
# filled this machine's disk once. Only images of this build's label are pruned.
docker image prune -f --filter label=org.replog.built-by=build-images.sh >/dev/null || true
