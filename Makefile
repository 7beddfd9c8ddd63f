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

.PHONY: setup run test bench demo stubs zookeeper chromium clean lint soak chaos-sweep

setup: $(VENV)/.installed zookeeper chromium $(STUBS)

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

$(STUBS): $(PROTO_SRC) $(VENV)/.installed
	$(PY) tools/gen_stubs.py

stubs: $(STUBS)

run: setup
	$(VENV)/bin/replog cluster up --data-dir data

test: setup
	$(PY) -m pytest $(PYTEST_ARGS)

bench: setup
	$(PY) -m bench

# Long runs that do not belong in `make test`: the replication integration tests looped on
# random seeds (SOAK_MINUTES, default 30); the first failure stops it and prints its seed.
soak: setup
	$(PY) tools/soak.py

# replog chaos over many seeds (CHAOS_SEEDS, default 200, x CHAOS_DURATION s, all nemeses;
# root gives every nemesis): the first invalid verdict stops it and prints its replay command.
chaos-sweep: setup
	$(PY) -m chaos.sweep --seeds $${CHAOS_SEEDS:-200} --duration $${CHAOS_DURATION:-60}

demo: setup
	$(VENV)/bin/replog demo --data-dir demo-data

lint: setup
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) common/rpc/*_pb2*.py data
