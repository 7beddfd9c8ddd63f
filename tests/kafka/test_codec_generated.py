"""The generated codec (common/kafka_protocol/generated/) is what tools/gen_kafka_messages.py
makes from the committed JSON files (proto/kafka/message/): regenerating gives the same bytes,
so nobody edits the output by hand and nobody forgets `make codecs`."""
from __future__ import annotations

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
GENERATED = ROOT / "common" / "kafka_protocol" / "generated"


def test_regenerating_gives_the_committed_bytes(tmp_path):
    subprocess.run([sys.executable, str(ROOT / "tools" / "gen_kafka_messages.py"), "--out",
                    str(tmp_path)], check=True, capture_output=True, cwd=ROOT)
    fresh = {p.name: p.read_bytes() for p in tmp_path.glob("*.py")}
    committed = {p.name: p.read_bytes() for p in GENERATED.glob("*.py")}
    assert sorted(fresh) == sorted(committed)
    stale = [n for n in fresh if fresh[n] != committed[n]]
    assert not stale, f"run `make codecs`: {stale} differ from the generator's output"


def test_every_json_file_has_its_module():
    jsons = {p.stem for p in (ROOT / "proto" / "kafka" / "message").glob("*.json")
             if not p.stem.endswith("Header")}
    from common.kafka_protocol.generated import CODECS
    assert {c.name for c in CODECS.values()} == jsons
