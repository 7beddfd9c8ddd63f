"""common/properties.py reads text as java.util.Properties.load does (issue 41 item 6): each case
is read by Java 17's own Properties.load too (a small program run with ``java File.java``) and
the two readings must agree; then the rules that matter to replog's callers."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from common.config import load_config
from common.errors import ConfigError
from common.properties import load_properties, parse_properties_text

CASES = {
    "plain": "a=1\nb = 2\n",
    "colon and space separators": "a: 1\nb 2\nc\t3\nd:4\ne :5\nf = = 6\ng  : : 7\n",
    "bare key": "alone\nempty=\n",
    "comments": "# c\n! c\n   # indented\n\t! tab\na=1 # not a comment\n",
    "blank lines": "\n\n   \na=1\n\n",
    "continuation": "a=one, \\\n    two, \\\n\tthree\nb=x\n",
    "continuation at the end": "a=one \\",
    "continued comment does not continue": "# c \\\na=1\n",
    "even backslashes do not continue": "a=x\\\\\nb=y\n",
    "empty continuation line": "a=x\\\n\nb=y\n",
    "hash on a continuation line": "a=x\\\n#y\n",
    "unicode escapes": "a=caf\\u00e9\nk\\u0065y=v\nsnow=\\u2603\n",
    "other escapes": "a=t\\tn\\nr\\rf\\f\nb=\\q\\z\\\\\n",
    "escaped separators in keys": "a\\=b=c\nd\\:e:f\ng\\ h i\n",
    "trailing whitespace kept": "a=1   \nb=2\t\n",
    "crlf and cr": "a=1\r\nb=2\rc=3\r\n",
    "duplicates": "a=1\na=2\n",
    "utf-8 text": "name=Zoë\n",
    "separator first": "=v\n:w\n",
    "malformed unicode": "a=\\u12\n",
    "malformed unicode digits": "a=\\uzzzz\n",
}

JAVA = r"""
import java.io.*;
import java.nio.charset.StandardCharsets;
import java.nio.file.*;
import java.util.*;

public class Props {
    static String hex(String s) {
        StringBuilder b = new StringBuilder();
        for (char c : s.toCharArray()) b.append(String.format("%04x", (int) c));
        return b.toString();
    }
    public static void main(String[] args) throws Exception {
        for (String path : args) {
            Properties p = new Properties();
            try (Reader r = Files.newBufferedReader(Paths.get(path), StandardCharsets.UTF_8)) {
                p.load(r);
                StringBuilder line = new StringBuilder("ok");
                for (String k : p.stringPropertyNames())
                    line.append(' ').append(hex(k)).append('=').append(hex(p.getProperty(k)));
                System.out.println(line);
            } catch (IllegalArgumentException e) {
                System.out.println("error " + e.getMessage());
            }
        }
    }
}
"""


def _unhex(h: str) -> str:
    return bytes.fromhex(h).decode("utf-16-be")


@pytest.fixture(scope="module")
def java_readings(tmp_path_factory) -> dict[str, dict[str, str] | str]:
    """What Java's Properties.load makes of each case: a dict, or its error message."""
    if shutil.which("java") is None:
        pytest.fail("java is missing (Java 17 is part of the machine: README)")
    d = tmp_path_factory.mktemp("java-properties")
    (d / "Props.java").write_text(JAVA)
    paths = []
    for i, text in enumerate(CASES.values()):
        p = d / f"case{i}.properties"
        p.write_bytes(text.encode("utf-8"))
        paths.append(str(p))
    done = subprocess.run(["java", str(d / "Props.java"), *paths], capture_output=True,
                          text=True, timeout=60, check=True)
    out: dict[str, dict[str, str] | str] = {}
    for name, line in zip(CASES, done.stdout.splitlines(), strict=True):
        if line.startswith("error "):
            out[name] = line[len("error "):]
        else:
            out[name] = {_unhex(k): _unhex(v) for k, _, v in
                         (item.partition("=") for item in line.split()[1:])}
    return out


def _ours(text: str) -> dict[str, str] | str:
    try:
        return {k: v for k, v, _ in load_properties(text, "f")}
    except ConfigError as e:
        return str(e).split(": ", 1)[1]


@pytest.mark.parametrize("name", CASES)
def test_read_as_java_reads_it(java_readings, name):
    assert _ours(CASES[name]) == java_readings[name]


def test_where_each_entry_starts_and_one_line_errors():
    entries = load_properties("# c\na=1\nb=x\\\n  y\nc=3\n", "client.properties")
    assert entries == [("a", "1", "client.properties:2"), ("b", "xy", "client.properties:3"),
                       ("c", "3", "client.properties:5")]
    with pytest.raises(ConfigError, match=r"^f.properties:2: Malformed \\uxxxx encoding\.$"):
        load_properties("a=1\nb=\\u00\n", "f.properties")


def test_callers_get_values_trimmed_as_kafka_configdef_trims_them():
    assert parse_properties_text("a = 1  \nb: x\n", "f") == [("a", "1", "f:1"), ("b", "x", "f:2")]


def test_a_server_properties_in_javas_forms_configures_a_broker(tmp_path):
    p = tmp_path / "server.properties"
    p.write_text("broker.id: 7\nlog.dirs /data/a,\\\n    /data/b\n"
                 "zookeeper.connect=localhost:2181\\u002fchroot\n")
    cfg = load_config(str(p))
    assert (cfg["broker.id"], cfg["log.dirs"], cfg["zookeeper.connect"]) == (
        7, ["/data/a", "/data/b"], "localhost:2181/chroot")
