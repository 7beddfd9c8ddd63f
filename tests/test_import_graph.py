"""The project's import graph has no cycle.

Two graphs are read from the source (ast, nothing imported):
- between the top-level packages (admin, broker, common, controller, ...), with every import
  counted - lazy ones inside functions and ``if TYPE_CHECKING:`` ones too: a dependency that
  runs back up (common importing broker) is a cycle even when Python tolerates it;
- between modules, with the imports that run when a module is loaded (module scope, not
  TYPE_CHECKING): a cycle there makes the result depend on which module is imported first;
  and again with every import, lazy and TYPE_CHECKING ones included.

Each cycle is reported with the edges that make it, so the fix is in the message."""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("admin", "analytics", "bench", "broker", "chaos", "client", "common", "controller",
            "harness", "tools")


def _modules(root: Path, packages) -> dict[str, Path]:
    out = {}
    for pkg in packages:
        for path in sorted((root / pkg).rglob("*.py")):
            if path.name.endswith(("_pb2.py", "_pb2_grpc.py")):
                continue  # generated code imports only grpc and protobuf
            name = ".".join(path.relative_to(root).with_suffix("").parts)
            out[name.removesuffix(".__init__")] = path
    return out


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or \
        (isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _load_time_imports(body) -> list[ast.stmt]:
    """Import statements run when the module loads: module scope, through if/try, without
    ``if TYPE_CHECKING:`` blocks."""
    out = []
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.append(node)
        elif isinstance(node, ast.If) and not _is_type_checking(node):
            out += _load_time_imports(node.body) + _load_time_imports(node.orelse)
        elif isinstance(node, ast.Try):
            out += _load_time_imports(node.body) + _load_time_imports(node.orelse) \
                + _load_time_imports(node.finalbody)
            for h in node.handlers:
                out += _load_time_imports(h.body)
    return out


def _imported(module: str, path: Path, node: ast.stmt) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    if node.level:
        parts = package.split(".")
        base = ".".join(parts[:len(parts) - node.level + 1] + ([node.module] if node.module
                                                                  else []))
    else:
        base = node.module or ""
    return [base] + [f"{base}.{a.name}" for a in node.names]  # a name may be a submodule


def import_graph(root: Path, packages, *, load_time_only: bool, depth: int | None = None
                 ) -> dict[str, dict[str, str]]:
    """node -> {imported node: "module -> module" of one import making the edge}. A node is a
    module, or with ``depth`` its first ``depth`` dotted parts (1: top-level packages)."""
    mods = _modules(root, packages)

    def node(m: str) -> str:
        return m if depth is None else ".".join(m.split(".")[:depth])

    graph: dict[str, dict[str, str]] = defaultdict(dict)
    for module, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        stmts = _load_time_imports(tree.body) if load_time_only else [
            n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
        for stmt in stmts:
            for target in _imported(module, path, stmt):
                if target in mods and node(target) != node(module):
                    graph[node(module)].setdefault(node(target), f"{module} -> {target}")
    return graph


def cycles(graph: dict[str, dict[str, str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan), each sorted."""
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _explain(graph, found) -> str:
    lines = []
    for comp in found:
        lines.append(" <-> ".join(comp) + ", through:")
        lines += [f"    {why}" for a in comp for b, why in sorted(graph[a].items()) if b in comp]
    return "\n".join(lines)


def test_the_top_level_packages_import_in_one_direction():
    graph = import_graph(ROOT, PACKAGES, load_time_only=False, depth=1)
    found = cycles(graph)
    assert not found, "import cycle between packages:\n" + _explain(graph, found)


def test_no_module_imports_itself_back_at_load_time():
    graph = import_graph(ROOT, PACKAGES, load_time_only=True)
    found = cycles(graph)
    assert not found, "import cycle between modules:\n" + _explain(graph, found)


def test_no_module_imports_itself_back_at_all():
    """Stricter: lazy imports inside functions and ``if TYPE_CHECKING:`` ones count too, so a
    cycle cannot hide behind a deferred import (a module that needs another's type takes a
    Protocol instead, as broker/kafka_api_context.py and harness/cluster_hosts.py do)."""
    graph = import_graph(ROOT, PACKAGES, load_time_only=False)
    found = cycles(graph)
    assert not found, "import cycle between modules:\n" + _explain(graph, found)


@pytest.mark.parametrize("load_time_only", [False, True])
def test_a_planted_cycle_is_found_and_named(tmp_path, load_time_only):
    for pkg, other in (("low", "high"), ("high", "low")):  # noqa: B007
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / "high" / "server.py").write_text("from low.config import Config\n")
    # the edge back up: at load time, or lazily inside a function
    back = "from high.server import x\n" if load_time_only else \
        "def f():\n    from high.server import x\n"
    (tmp_path / "low" / "config.py").write_text("import os\n" + back)
    for depth in (1, None):
        graph = import_graph(tmp_path, ("low", "high"), load_time_only=load_time_only,
                             depth=depth)
        found = cycles(graph)
        assert found == ([["high", "low"]] if depth == 1 else [["high.server", "low.config"]])
        assert "low.config -> high.server" in _explain(graph, found)
    # a TYPE_CHECKING import is no load-time cycle, but it is a dependency between packages
    (tmp_path / "low" / "config.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from high.server import x\n")
    assert cycles(import_graph(tmp_path, ("low", "high"), load_time_only=True)) == []
    assert cycles(import_graph(tmp_path, ("low", "high"), load_time_only=False, depth=1)) \
        == [["high", "low"]]


def _imports_generated_code(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for n in ast.walk(tree):
        if isinstance(n, ast.Import) and any(a.name.endswith(("_pb2", "_pb2_grpc"))
                                             for a in n.names):
            return True
        if isinstance(n, ast.ImportFrom) and (
                (n.module or "").endswith(("_pb2", "_pb2_grpc"))
                or any(a.name.endswith(("_pb2", "_pb2_grpc")) for a in n.names)):
            return True
    return False


def test_the_controller_core_imports_no_generated_code():
    """The core builds its requests as plain values; protobuf is the channel's and the
    servicer's business (controller/request_pb.py converts at the wire). Checked over every
    module the core reaches, lazy imports included."""
    mods = _modules(ROOT, PACKAGES)
    graph = import_graph(ROOT, PACKAGES, load_time_only=False)
    seen, todo = set(), ["controller.core"]
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo += list(graph.get(m, {}))
    offenders = sorted(m for m in seen if _imports_generated_code(mods[m]))
    assert "controller.request_batch" in seen and "common.controller_requests" in seen
    assert offenders == [], f"reached from controller.core and importing protobuf: {offenders}"
