# One setup step shared by run, test and bench: on a fresh machine it creates the virtual
# environment, installs replog with its test/dev extras, installs Debian's ZooKeeper 3.8 when it
# is missing (as root), and generates the gRPC stubs from proto/.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
ZK_JAR := /usr/share/java/zookeeper.jar
PROTO_SRC := $(wildcard proto/replog/v1/*.proto)
STUBS := common/rpc/replog_pb2.py

.PHONY: setup run test bench demo stubs codecs zookeeper chromium prometheus kcat docker compose-build compose-up compose-down clean lint soak chaos-sweep

setup: $(VENV)/.installed zookeeper chromium prometheus kcat docker $(STUBS)

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,dev]'
	touch $@

zookeeper:
	@if [ ! -f $(ZK_JAR) ]; then \
	  if [ "$$(id -u)" != 0 ]; then echo "ZooKeeper missing: run 'apt-get install zookeeper' as root" >&2; exit 1; fi; \
	  echo "installing Debian's zookeeper"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq zookeeper >/dev/null; \
	fi
	@command -v java >/dev/null || { echo "java is missing (ZooKeeper needs a JRE)" >&2; exit 1; }

# The analytics integration test renders replog analyze's report in headless Chromium.
chromium:
	@if ! command -v chromium >/dev/null; then \
	  if [ "$$(id -u)" != 0 ]; then echo "Chromium missing: run 'apt-get install chromium' as root" >&2; exit 1; fi; \
	  echo "installing Debian's chromium"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	fi

# Debian's Prometheus (and promtool): the rule tests and `replog cluster up --prometheus`.
prometheus:
	@if ! command -v promtool >/dev/null; then \
	  if [ "$$(id -u)" != 0 ]; then echo "Prometheus missing: run 'apt-get install prometheus' as root" >&2; exit 1; fi; \
	  echo "installing Debian's prometheus"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null; \
	fi

# Debian's kcat (librdkafka's command-line client): the Kafka listener tests (tests/kafka/).
kcat:
	@if ! command -v kcat >/dev/null; then \
	  if [ "$$(id -u)" != 0 ]; then echo "kcat missing: run 'apt-get install kcat' as root" >&2; exit 1; fi; \
	  echo "installing Debian's kcat"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat >/dev/null; \
	fi

# Docker engine, docker-compose and debootstrap for the compose test (tests/observability/
# test_compose.py). Without root they are left alone: that test then skips, saying why.
docker:
	@if ! command -v dockerd >/dev/null || ! command -v docker-compose >/dev/null || ! command -v debootstrap >/dev/null; then \
	  if [ "$$(id -u)" != 0 ]; then echo "docker.io/docker-compose/debootstrap missing (need root to install): the compose test will skip" >&2; exit 0; fi; \
	  echo "installing Debian's docker.io, docker-compose and debootstrap"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io docker-compose debootstrap >/dev/null; \
	fi

$(STUBS): $(PROTO_SRC) $(VENV)/.installed
	$(PY) tools/gen_stubs.py

stubs: $(STUBS)

# The Kafka protocol codec, generated from Kafka's message JSON files (proto/kafka/message/).
# Its output is committed (tests/kafka/test_codec_generated.py checks it is current), so setup
# does not depend on it: run it after changing a JSON file or the generator.
codecs:
	$(PY) tools/gen_kafka_messages.py

run: setup
	$(VENV)/bin/replog cluster up --data-dir data

test: setup
	$(PY) -m pytest --durations=25 $(PYTEST_ARGS)

bench: setup
	$(PY) -m bench

# Long runs that do not belong in `make test`: the replication integration tests looped on
# random seeds (SOAK_MINUTES, default 30); the first failure stops it and prints its seed.
# The long runs, not in CI: 50,000 simulated controller seeds, 20,000 whole-cluster simulation
# seeds x 60 steps (docs/simulation.md), 30 minutes of the replication
# integration tests on random seeds (SOAK_MINUTES), the tests marked soak (ZooKeeper ensemble
# fault rounds; `make test` deselects them), then replog chaos over SOAK_CHAOS_SEEDS seeds
# (default 200) x 60 s with every nemesis (about 4.5 h on 2 cores; 0 skips it), over
# SOAK_ZK_SEEDS (default 200) x 60 s with the ZooKeeper ensemble nemeses and kill on a 3-member
# ensemble, and, as root, over SOAK_HOSTS_SEEDS (default 200) x 60 s with the host, ensemble
# and kill nemeses on a 3-member ensemble and 2 racks 2 ms apart, every process its own host
# (0 skips either).
soak: setup
	$(PY) -m tests.sim --seeds 10000-59999 --steps 60
	$(PY) -m tests.sim cluster --seeds 10000-29999 --steps 60
	$(PY) -m tests.sim cluster --seeds 10000-14999 --steps 60 --profile jbod
	$(PY) tools/soak.py
	REPLOG_FUZZ_EXAMPLES=$${REPLOG_FUZZ_EXAMPLES:-5000} $(PY) -m pytest -q tests/kafka/test_kafka_fuzz.py
# bounded and fuzzed input (docs/fuzzing.md): the hypothesis properties with more examples,
# then atheris, coverage-guided, SOAK_FUZZ_SECONDS (default 600) per target
	REPLOG_FUZZ_EXAMPLES=$${REPLOG_FUZZ_EXAMPLES:-2000} $(PY) -m pytest -q tests/security/test_fuzz_*.py
	$(PY) tools/fuzz/run.py --seconds $${SOAK_FUZZ_SECONDS:-600}
	$(PY) -m pytest -q -m soak tests
	test "$${SOAK_CHAOS_SEEDS:-200}" = 0 || \
		$(PY) -m chaos.sweep --seeds $${SOAK_CHAOS_SEEDS:-200} --duration 60
	test "$${SOAK_ZK_SEEDS:-200}" = 0 || $(PY) -m chaos.sweep --seeds $${SOAK_ZK_SEEDS:-200} \
		--duration 60 --zookeeper-nodes 3 --nemesis zookeeper,kill
	test "$$(id -u)" != 0 || test "$${SOAK_HOSTS_SEEDS:-200}" = 0 || $(PY) -m chaos.sweep \
		--seeds $${SOAK_HOSTS_SEEDS:-200} --duration 60 --zookeeper-nodes 3 --hosts --racks 2 \
		--inter-rack-latency-ms 2 --nemesis hosts,zookeeper,kill

# replog chaos over many seeds (CHAOS_SEEDS, default 200, x CHAOS_DURATION s, all nemeses;
# root gives every nemesis): the first invalid verdict stops it and prints its replay command.
chaos-sweep: setup
	$(PY) -m chaos.sweep --seeds $${CHAOS_SEEDS:-200} --duration $${CHAOS_DURATION:-60}

# The compose cluster (docker-compose.yml). REPLOG_BASE_IMAGE=python:3.11-slim where Docker
# Hub is reachable; by default the base is built from Debian's packages (docker/base-image.sh).
compose-build: setup
	docker/build-images.sh $(PY)

# SECURITY=mtls: with docker-compose.mtls.yml, mutual TLS on every listener, ACLs and ZooKeeper
# ACLs (docs/security.md "Compose"); the host's admin client properties are
# build/compose-mtls/client.properties. compose-down takes both files, so it removes either
# stack with its certs container and ssl volume (and the host's client files: their CA is gone).
ifneq ($(filter-out mtls,$(SECURITY)),)
$(error SECURITY=$(SECURITY): expected mtls, or nothing for plaintext)
endif
COMPOSE_FILES = -f docker-compose.yml $(if $(SECURITY),-f docker-compose.mtls.yml)

compose-up: compose-build
	REPLOG_BASE_IMAGE=$${REPLOG_BASE_IMAGE:-replog-base:bookworm} docker-compose $(COMPOSE_FILES) up -d
	@echo "bootstrap (the EXTERNAL listeners): 127.0.0.1:19092,127.0.0.1:19093,127.0.0.1:19094; Prometheus: http://127.0.0.1:19090"
	$(if $(SECURITY),@echo "mTLS: add --command-config build/compose-mtls/client.properties (User:admin)")

compose-down:
	docker-compose -f docker-compose.yml -f docker-compose.mtls.yml down -v
	rm -rf build/compose-mtls

demo: setup
	$(VENV)/bin/replog demo --data-dir demo-data

# ruff (the rules in pyproject.toml), import-linter (the layers) and mypy (the pure cores); make
# test runs the same three through tests/test_lint.py.
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) common/rpc/*_pb2*.py data

# replog lab (docs/lab.md): the lab's own end-to-end tests (a kip-966 A/B run interrupted and
# resumed, a reassignment run with a controller failover: about 3 min), then every runnable
# experiment (replog lab list) with LAB_SEEDS seeds per arm (default 10) into
# LAB_OUT/<experiment> (default lab-results/); a stopped 'make lab' goes on where it stopped
# (--resume). 20-40 s per run here: kip-966 (5 arms x 10 seeds) ~30 min, kip-461, kip-501
# and jbod (2 x 10) ~8 min each, reassignment (6 x 10) ~35 min: about 1.5 hours in all.
# 'python -m bench lab' prints the wall time per arm and per run of what it wrote.
.PHONY: lab
lab: setup
	REPLOG_LAB_TESTS=1 $(PY) -m pytest -q tests/chaos/test_lab.py
	for e in $$($(VENV)/bin/replog lab list | awk '!/not runnable/ {print $$1}'); do \
	  $(VENV)/bin/replog lab run $$e --seeds $${LAB_SEEDS:-10} \
	    --out $${LAB_OUT:-lab-results}/$$e --resume || exit 1; \
	done
