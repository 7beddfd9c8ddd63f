"""No module in harness/, chaos/ or common/ grows past 600 lines (issue 43): a file that long
holds several ideas, and a newcomer reads a module whole. Split it by idea (as
harness/local_cluster.py became process, data-dir and ZooKeeper modules) rather than raise the
limit. Generated code is exempt: nobody reads it to learn the design, and its generator decides
its length - the gRPC stubs (common/rpc/replog_pb2*.py, from proto/ by ``make stubs``) and the
Kafka message codecs (common/kafka_protocol/generated/, tools/gen_kafka_messages.py)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 600
PACKAGES = ("harness", "chaos", "common")
GENERATED = (re.compile(r"^common/rpc/replog_pb2(_grpc)?\.py$"),
             re.compile(r"^common/kafka_protocol/generated/"))


def _modules():
    for pkg in PACKAGES:
        for p in sorted((ROOT / pkg).rglob("*.py")):
            rel = p.relative_to(ROOT).as_posix()
            if "__pycache__" in rel or any(g.search(rel) for g in GENERATED):
                continue
            yield rel, p


def test_no_module_in_harness_chaos_or_common_is_over_600_lines():
    too_long = {rel: n for rel, p in _modules()
                if (n := len(p.read_text(encoding="utf-8").splitlines())) > LIMIT}
    assert too_long == {}, f"over {LIMIT} lines (split by idea): {too_long}"


def test_the_exemptions_name_generated_files_only():
    exempt = [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")
              if any(g.search(p.relative_to(ROOT).as_posix()) for g in GENERATED)]
    assert exempt, "the exemptions match nothing: drop them"
    for p in exempt:
        head = p.read_text(encoding="utf-8")[:600].lower()
        assert "generated" in head or "do not edit" in head, f"{p}: exempt but not generated"
