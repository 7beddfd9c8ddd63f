"""Generate the Python gRPC stubs for proto/replog/v1/*.proto into common/rpc/.

protoc emits absolute imports (``import replog_pb2``) between generated modules; they are
rewritten to package-relative imports so the stubs live inside ``common.rpc``.
"""

from __future__ import annotations

import pathlib
import re
import sys

import grpc_tools
from grpc_tools import protoc

ROOT = pathlib.Path(__file__).resolve().parent.parent
SRC = ROOT / "proto" / "replog" / "v1"
OUT = ROOT / "common" / "rpc"


def main() -> int:
    protos = sorted(SRC.glob("*.proto"))
    include = pathlib.Path(grpc_tools.__file__).parent / "_proto"
    args = ["protoc", f"-I{SRC}", f"-I{include}", f"--python_out={OUT}", f"--pyi_out={OUT}",
            f"--grpc_python_out={OUT}", *map(str, protos)]
    if protoc.main(args) != 0:
        print("protoc failed", file=sys.stderr)
        return 1
    names = [p.stem for p in protos]
    for gen in OUT.glob("*_pb2*.py"):
        text = gen.read_text()
        for name in names:
            text = re.sub(rf"^import {name}_pb2 as", f"from . import {name}_pb2 as", text, flags=re.M)  # noqa: E501
        gen.write_text(text)
    print(f"generated stubs for {', '.join(p.name for p in protos)} in {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
