"""Design citations in code resolve to sections of docs/design.md.

A comment or docstring cites a design as ``design.md#ANCHOR``; every such citation, in any
Python file of the repository, must name an anchor of docs/design.md. The older citations -
"seed 003" (the source documents, kept outside the repository), "C5" (the roadmap's
capability numbers) and "finding D" (the cluster simulation's findings) - are reported in
comments and docstrings, and ``--fix`` rewrites them mechanically into design.md citations
(comment and docstring text only, never code or other strings). After a merge brings older
citations back, take either side and run ``--fix`` again.

A rule a comment (or design.md) states names the regression test that pins it as
``tests/<path>.py::test_<name>``; every such name must be a test of that file, so a renamed
test cannot leave the rule pointing nowhere.

    python tools/design_refs.py [--fix] [ROOT]    # exit 1 and one line per problem
"""

from __future__ import annotations

import importlib.util
import io
import re
import sys
import tokenize
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("check_doc_links",
                                               _ROOT / "tools" / "check_doc_links.py")
_links = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_links)

DESIGN = Path("docs") / "design.md"
REF = re.compile(r"design\.md#([a-z0-9]+(?:-[a-z0-9]+)*)")
SKIP_DIRS = {".venv", ".git", "build", "node_modules", "__pycache__"}
GENERATED = re.compile(r"_pb2(_grpc)?\.py$")
# the checker and its test quote the older citations on purpose
EXEMPT = {Path("tools") / "design_refs.py", Path("tests") / "test_design_refs.py"}

SEED_ANCHOR = {"000": "kip-461", "001": "kip-966", "002": "kip-501", "003": "jbod",
               "004": "reassignment"}
SEED_KIP = {"000": "KIP-461", "001": "KIP-966", "002": "KIP-501", "003": None, "004": None}
CAPABILITY_ANCHOR = {1: "storage", 2: "cluster-core", 3: "kip-461", 4: "kip-501", 5: "jbod",
                     6: "reassignment", 7: "kip-966"}

# "C1" that is not a capability: the JVM's client compiler
NOT_A_CAPABILITY = re.compile(r"C[12]-only|C1/C2|C2 compiler")
SEED_DETAIL = re.compile(
    r"\b[Ss]eed (00[0-4])(?:'s)?"
    r"(?: (?P<kind>step|steps|case|section) (?P<num>\d+(?:\.\d+)?)(?![-\d])"
    r"| (?P<oq>open question)s?(?: \d)?)")
SEED = re.compile(r"\b[Ss]eeds? (00[0-4])(?: (and|or|,) (00[0-4]))?\b")
SPEC_CAP = re.compile(r"\b(?:SPEC(?:'s)? )?(?<![-\w])C([1-9]|1[0-9])\b(?![-\w]|\.\d)")
CAP_RANGE = re.compile(r"\b(?:SPEC(?:'s)? )?(?<![-\w])C([1-9]|1[0-9])-C([1-9]|1[0-9])\b")
FINDING = re.compile(
    r"(?:(?:[Cc]luster|whole-cluster) simulation )?\b([Ff])inding ([A-H])\b"
    r"(?: of the whole-cluster simulation)?"
    r"(?:,? seeds? \d+(?: and \d+)?(?=[),.;:])| \(seeds? \d+(?: and \d+)?\))?")


def _seed_detail(m: re.Match) -> str:
    seed, kind, num = m.group(1), m.group("kind"), m.group("num")
    base = SEED_ANCHOR[seed]
    if m.group("oq") and seed == "003":
        return f"design.md#jbod-open-questions ({m.group(0).split(' ', 2)[2]})"
    if kind in ("step", "steps") and seed in ("003", "004") and num:
        n = num.replace(".", "-")
        anchor = f"{base}-step-{n}"
        return f"design.md#{anchor}"
    if kind == "case" and seed == "004":
        return f"design.md#reassignment-case-{num}"
    if kind == "section" and seed == "004" and num == "3":
        return "design.md#reassignment-failover"
    return m.group(0)


def _seed(m: re.Match) -> str:
    out = f"design.md#{SEED_ANCHOR[m.group(1)]}"
    if m.group(3):
        out += f" {m.group(2)} design.md#{SEED_ANCHOR[m.group(3)]}".replace(" ,", ",")
    return out


def _cap(m: re.Match) -> str:
    n = int(m.group(1))
    return f"design.md#{CAPABILITY_ANCHOR.get(n, f'c{n}')}"


def _cap_range(m: re.Match) -> str:
    refs = []
    for n in range(int(m.group(1)), int(m.group(2)) + 1):
        ref = f"design.md#{CAPABILITY_ANCHOR.get(n, f'c{n}')}"
        if ref not in refs:
            refs.append(ref)
    return ", ".join(refs)


def _finding(m: re.Match) -> str:
    return f"design.md#sim-finding-{m.group(2).lower()}"


def _collapse(text: str) -> str:
    """One citation where a rewrite put a design.md citation next to the KIP it names, or the
    same citation twice ("seed 003, C5")."""
    before = None
    while before != text:
        before = text
        for anchor in set(REF.findall(text)):
            ref = re.escape(f"design.md#{anchor}")
            kip = anchor.upper() if anchor.startswith("kip-") else None
            pats = [rf"{ref}(?:,| /| \+| and|;) {ref}(?![-\w])", rf"{ref} \({ref}\)"]
            text = re.sub(rf"{ref}(?:,| /) ({ref}-[a-z0-9-]+)", r"\1", text)
            text = re.sub(rf"{ref} \(({ref}-[a-z0-9-]+)", r"(\1", text)
            text = re.sub(rf"{ref} \({ref}(?:,| /)? ", f"design.md#{anchor} (", text)
            if kip:
                pats += [rf"{ref}(?:,| /| \+) {kip}\b(?!/)", rf"\b{kip}(?:,| /| \+) {ref}",
                         rf"\b{kip} \({ref}\)", rf"{ref} \({kip}\)"]
            for p in pats:
                text = re.sub(p, f"design.md#{anchor}", text)
            # "design.md#jbod's handler (design.md#jbod)", from "seed 003's handler (C5)": the
            # repeat on one line goes
            text = "\n".join(re.sub(rf"({ref}(?![-\w]).*?)(?: \({ref}\)|, {ref}(?![-\w]))",
                                     r"\1", line) for line in text.split("\n"))
    return text


def rewrite(text: str) -> str:
    """A comment's or docstring's text with its older citations rewritten."""
    if "design.md#" not in text and not re.search(r"[Ss]eeds? 00[0-4]|\bC\d|[Ff]inding [A-H]",
                                                  text):
        return text
    out = SEED_DETAIL.sub(_seed_detail, text)
    out = SEED.sub(_seed, out)
    if not NOT_A_CAPABILITY.search(out):
        out = CAP_RANGE.sub(_cap_range, out)
        out = SPEC_CAP.sub(_cap, out)
    out = FINDING.sub(_finding, out)
    return _collapse(out)


def _legacy(text: str) -> list[str]:
    found = [m.group(0) for m in re.finditer(r"\b[Ss]eeds? 00[0-4]\b", text)]
    if not NOT_A_CAPABILITY.search(text):
        found += [m.group(0) for m in SPEC_CAP.finditer(text)]
        found += [m.group(0) for m in CAP_RANGE.finditer(text)]
    found += [m.group(0) for m in re.finditer(r"\b[Ff]inding [A-H]\b", text)]
    return found


def _prose_tokens(source: str):
    """(start, end, text) of each comment and each string that stands alone as a statement
    (docstrings): the text a design citation lives in."""
    toks = list(tokenize.generate_tokens(io.StringIO(source).readline))
    significant = [t for t in toks if t.type not in (tokenize.NL, tokenize.COMMENT)]
    for t in toks:
        if t.type == tokenize.COMMENT:
            yield t.start, t.end, t.string
    for i, t in enumerate(significant):
        if t.type != tokenize.STRING:
            continue
        before = significant[i - 1].type if i else tokenize.ENCODING
        after = significant[i + 1].type if i + 1 < len(significant) else tokenize.ENDMARKER
        if before in (tokenize.INDENT, tokenize.DEDENT, tokenize.NEWLINE, tokenize.ENCODING) \
                and after in (tokenize.NEWLINE, tokenize.ENDMARKER):
            yield t.start, t.end, t.string


def python_files(root: Path):
    for p in sorted(root.rglob("*.py")):
        rel = p.relative_to(root)
        if SKIP_DIRS & set(rel.parts) or GENERATED.search(p.name) or rel in EXEMPT:
            continue
        yield p


def _offset(lines: list[str], pos: tuple[int, int]) -> int:
    return sum(len(x) for x in lines[:pos[0] - 1]) + pos[1]


LIMIT = 100  # [tool.ruff] line-length
LIST_ITEM = re.compile(r"^(?:[-*] |\d+[.)] |>>>|```|\.\. |[\"']{3}$)")
QUOTES = ('"""', "'''")


def _prose_line(line: str, docstring: bool) -> tuple[str, str] | None:
    """(prefix, text) of a line of prose: a whole-line comment, or a docstring line."""
    m = re.match(r"^(\s*# ?)(.*)$", line)
    if m is None and docstring:
        m = re.match(r"^(\s*)(.*)$", line)
    return (m.group(1), m.group(2)) if m else None


def _reflow(lines: list[str], changed: set[int], docstring: set[int]) -> list[str]:
    """Lines a rewrite made longer than LIMIT wrapped at a space, the overflow carried into the
    next line of the same paragraph (same prefix, not a list item) or into a new line."""
    out = list(lines)
    flags = [i in docstring for i in range(len(out))]
    todo = [i in changed for i in range(len(out))]
    i = 0
    while i < len(out):
        line = out[i]
        parsed = _prose_line(line, flags[i]) if todo[i] and len(line) > LIMIT else None
        cut = line.rfind(" ", 0, LIMIT + 1) if parsed else -1
        if parsed is None or cut <= len(parsed[0]) + 1:
            i += 1
            continue
        prefix, text = parsed
        sep = re.match(r"^(.*\S) ([-=]{4,})$", line)
        if sep and len(sep.group(1)) + 5 <= LIMIT:  # a section rule: shorter, not wrapped
            out[i] = sep.group(1) + " " + sep.group(2)[:LIMIT - len(sep.group(1)) - 1]
            i += 1
            continue
        sep = re.match(r"^(\s*# )([-=]{4,})( .*)$", line)
        if sep and len(sep.group(1)) + len(sep.group(3)) + 4 <= LIMIT:
            out[i] = sep.group(1) + sep.group(2)[:LIMIT - len(sep.group(1)) - len(sep.group(3))] \
                + sep.group(3)
            i += 1
            continue
        item = re.match(r"^[-*] |^\d+[.)] ", text)
        cont = prefix + (" " * len(item.group(0)) if item else "")
        column = re.search(r"\S {2,}(?=\S)", text)
        if column:  # a table: the overflow goes under its column, into a line of its own
            cont = " " * (len(prefix) + column.end())
        head, rest = line[:cut].rstrip(), line[cut + 1:].lstrip()
        nxt = out[i + 1] if i + 1 < len(out) else None
        nparsed = _prose_line(nxt, flags[i + 1]) if nxt is not None else None
        if nparsed and not column and nparsed[0] == cont and nparsed[1].strip() and \
                not LIST_ITEM.match(nparsed[1]) and not rest.endswith(QUOTES):
            out[i + 1] = cont + rest + " " + nparsed[1]
        else:
            out.insert(i + 1, cont + rest)
            flags.insert(i + 1, flags[i])
            todo.insert(i + 1, True)
        out[i] = head
        todo[i + 1] = True
        i += 1
    return out


def fix_source(source: str) -> str:
    lines = source.splitlines(keepends=True)
    spans = sorted(((_offset(lines, s), _offset(lines, e), t)
                    for s, e, t in _prose_tokens(source)), reverse=True)
    for a, b, text in spans:
        new = rewrite(text)
        if new != text:
            source = source[:a] + new + source[b:]
    new_lines = source.splitlines()
    if len(new_lines) != len(lines):
        return source
    changed = {i for i, (x, y) in enumerate(zip(lines, new_lines)) if x.rstrip("\n") != y}
    docstring = {n - 1 for (s, _), (e, _), t in _prose_tokens(source) if not t.startswith("#")
                 for n in range(s, e + 1)}
    end = "\n" if source.endswith("\n") else ""
    return "\n".join(_reflow(new_lines, changed, docstring)) + end


# "tests/broker/test_x.py::test_y", a comment's pointer to the regression test that pins its
# rule; the name may wrap onto the comment's or docstring's next line
TEST_REF = re.compile(r"\b(tests/[\w/]+\.py)::(?:\s*#)?\s*(test_\w+)")


def _test_names(path: Path) -> set[str]:
    return set(re.findall(r"^\s*(?:async )?def (test_\w+)", path.read_text(encoding="utf-8"),
                          re.M))


def _test_ref_problems(root: Path, rel: Path, source: str) -> list[str]:
    """A test a comment names as the one pinning its rule exists (a renamed test would leave
    the rule pointing nowhere, as the seed numbers did)."""
    bad = []
    for m in TEST_REF.finditer(source):
        line = source.count("\n", 0, m.start()) + 1
        target = root / m.group(1)
        if not target.is_file():
            bad.append(f"{rel}:{line}: {m.group(1)}: no such test file")
        elif m.group(2) not in _test_names(target):
            bad.append(f"{rel}:{line}: {m.group(1)}::{m.group(2)}: no such test")
    return bad


def problems(root: Path) -> list[str]:
    anchors = _links.anchors(root / DESIGN)
    # design.md names the test that pins each rule too
    bad = _test_ref_problems(root, DESIGN, (root / DESIGN).read_text(encoding="utf-8"))
    for p in python_files(root):
        source = p.read_text(encoding="utf-8")
        rel = p.relative_to(root)
        for n, line in enumerate(source.splitlines(), 1):
            for anchor in REF.findall(line):
                if anchor not in anchors:
                    bad.append(f"{rel}:{n}: design.md#{anchor}: no such section")
        if "::" in source:
            bad += _test_ref_problems(root, rel, source)
        if not re.search(r"[Ss]eeds? 00[0-4]|\bC\d|[Ff]inding [A-H]", source):
            continue
        try:
            prose = list(_prose_tokens(source))
        except (tokenize.TokenError, SyntaxError):
            continue
        for (line, _), _, text in prose:
            for old in _legacy(text):
                bad.append(f"{rel}:{line}: {old!r} cites a design outside the repository "
                           f"(python tools/design_refs.py --fix)")
    return bad


def main(argv: list[str]) -> int:
    fix = "--fix" in argv
    args = [a for a in argv if a != "--fix"]
    root = Path(args[0] if args else ".").resolve()
    if fix:
        for p in python_files(root):
            source = p.read_text(encoding="utf-8")
            if re.search(r"[Ss]eeds? 00[0-4]|\bC\d|[Ff]inding [A-H]", source):
                new = fix_source(source)
                if new != source:
                    p.write_text(new, encoding="utf-8")
    bad = problems(root)
    for line in bad:
        print(line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
