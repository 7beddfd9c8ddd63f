"""Every relative markdown link in README.md and docs/**/*.md resolves to a file, and every
#anchor names a heading of its target (GitHub's slug rules); links inside fenced blocks and
absolute URLs are not checked.

    python tools/check_doc_links.py [ROOT]      # exit 1 and one line per broken link
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^#{1,6}\s+(.*)$")
# an explicit anchor, <a id="name"></a>: stable where a heading's wording may change
# (docs/design.md's sections, which code comments cite)
EXPLICIT = re.compile(r'<a id="([^"]+)"></a>')


def _unfenced(path: Path):
    """(line number, line) of the lines outside fenced code blocks."""
    fence = False
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("```"):
            fence = not fence
        elif not fence:
            yield n, line


def anchors(path: Path) -> set[str]:
    """GitHub's anchor of every heading (lower case, punctuation dropped, spaces to dashes) and
    every explicit <a id> anchor."""
    out = set()
    for _, line in _unfenced(path):
        out.update(EXPLICIT.findall(line))
        m = HEADING.match(line)
        if m:
            out.add(re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-"))
    return out


def broken_links(root: Path) -> list[str]:
    files = [root / "README.md", *sorted((root / "docs").rglob("*.md"))]
    bad = []
    for f in files:
        for n, line in _unfenced(f):
            for target in LINK.findall(line):
                if re.match(r"^[a-z]+://|^mailto:", target):
                    continue
                path, _, anchor = target.partition("#")
                dest = (f.parent / path).resolve() if path else f
                where = f"{f.relative_to(root)}:{n}: {target}"
                if not dest.exists():
                    bad.append(f"{where}: no such file")
                elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                    bad.append(f"{where}: no heading #{anchor}")
    return bad


def main(argv: list[str]) -> int:
    bad = broken_links(Path(argv[0] if argv else "."))
    for line in bad:
        print(line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
