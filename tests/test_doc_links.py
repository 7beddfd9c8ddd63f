"""README.md and docs/ link only to files and headings that exist (tools/check_doc_links.py),
so moving a section into docs/ cannot leave a dead link behind; and the checker itself notices
a missing file, a missing heading and a missing image."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# a script under tools/ (not a package): loaded from its file
_spec = importlib.util.spec_from_file_location("check_doc_links",
                                               ROOT / "tools" / "check_doc_links.py")
check_doc_links = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_doc_links)


def test_the_readme_and_docs_have_no_broken_link():
    assert check_doc_links.broken_links(ROOT) == []


def test_the_checker_finds_each_kind_of_broken_link(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text("# A page\n\n## Its section\n")
    (tmp_path / "README.md").write_text(
        "# r\n[ok](docs/page.md#its-section) [gone](docs/gone.md) "
        "[anchor](docs/page.md#no-such) ![img](docs/pic.png)\n"
        "```\n[in a fence](docs/ignored.md)\n```\n")
    bad = check_doc_links.broken_links(tmp_path)
    assert [b.split(": ", 1)[1] for b in bad] == [
        "docs/gone.md: no such file", "docs/page.md#no-such: no heading #no-such",
        "docs/pic.png: no such file"]
