"""java.util.Properties text, read as Java's ``Properties.load`` reads it, as Kafka's tools and
server.properties use it: read by the process configuration (common/config.py) and by client
property files (``--command-config``, common/security/tls.py) alike.

Java's rules (Properties.load and its LineReader, Java 17), which ``load_properties`` follows:

- natural lines end at ``\\n``, ``\\r`` or ``\\r\\n``; leading spaces, tabs and form feeds of
  every natural line are skipped;
- a line whose first other character is ``#`` or ``!`` is a comment, and a blank line is
  skipped; neither continues with a trailing backslash;
- a line ending in an odd number of backslashes continues on the next natural line (the
  backslash and the next line's leading whitespace dropped); an empty continuation line ends
  the logical line; at the end of the text a lone trailing backslash is dropped;
- the key runs to the first unescaped ``=``, ``:``, space, tab or form feed; whitespace and at
  most one ``=`` or ``:`` after it are skipped, and the rest of the line is the value (trailing
  whitespace kept): ``key=value``, ``key: value``, ``key value`` and a bare ``key`` (empty
  value) are all valid;
- in keys and values ``\\uXXXX`` is that character (anything else after ``\\u`` is an error:
  Java's "Malformed \\uxxxx encoding."), ``\\t``, ``\\n``, ``\\r``, ``\\f`` are those
  characters, and a backslash before any other character stands for that character
  (``\\=``, ``\\:``, ``\\ ``, ``\\\\``, ``\\#``).

One difference: a file is decoded as UTF-8 text before it is read (Java's
``load(InputStream)`` reads ISO-8859-1 bytes, so non-ASCII text needs ``\\uXXXX`` escapes
there). tests/test_properties.py checks these rules against Java's own ``Properties.load``.
"""

from __future__ import annotations

from common.errors import ConfigError

_WHITESPACE = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def logical_lines(text: str) -> list[tuple[int, str]]:
    """(number of its first natural line, raw text) of each logical line that is not a
    comment or blank: Java's Properties.LineReader."""
    out: list[tuple[int, str]] = []
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    current: list[str] | None = None  # the logical line being continued
    start = 0
    for lineno, raw in enumerate(lines, 1):
        line = raw.lstrip(_WHITESPACE)
        if current is None:
            if not line or line[0] in "#!":
                continue
            current, start = [], lineno
        elif not line:  # an empty continuation line ends the logical line
            out.append((start, "".join(current)))
            current = None
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            current.append(line[:-1])
            continue
        current.append(line)
        out.append((start, "".join(current)))
        current = None
    if current is not None:  # the text ended on a continuation
        out.append((start, "".join(current)))
    return out


def split_key_value(line: str) -> tuple[str, str]:
    """The raw (still escaped) key and value of one logical line: Java's Properties.load0."""
    n = len(line)
    key_end = 0
    value_start = n
    has_sep = False
    escaped = False
    while key_end < n:
        c = line[key_end]
        if not escaped and c in "=:":
            value_start, has_sep = key_end + 1, True
            break
        if not escaped and c in _WHITESPACE:
            value_start = key_end + 1
            break
        escaped = (not escaped) if c == "\\" else False
        key_end += 1
    while value_start < n:
        c = line[value_start]
        if c not in _WHITESPACE:
            if not has_sep and c in "=:":
                has_sep = True
            else:
                break
        value_start += 1
    return line[:key_end], line[value_start:]


def unescape(s: str) -> str:
    """Java's Properties.loadConvert; ValueError for a malformed ``\\uXXXX``."""
    if "\\" not in s:
        return s
    out = []
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        i += 1
        if c != "\\":
            out.append(c)
            continue
        if i == n:  # a lone backslash at the very end stands for nothing
            break
        c = s[i]
        i += 1
        if c == "u":
            digits = s[i:i + 4]
            if len(digits) < 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise ValueError("Malformed \\uxxxx encoding.")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_ESCAPES.get(c, c))
    return "".join(out)


def load_properties(text: str, source: str) -> list[tuple[str, str, str]]:
    """(key, value, where) of each entry, in order, exactly as Java reads them (a key given
    twice appears twice; the last one wins in a Properties object)."""
    out = []
    for lineno, line in logical_lines(text):
        key, value = split_key_value(line)
        try:
            out.append((unescape(key), unescape(value), f"{source}:{lineno}"))
        except ValueError as e:
            raise ConfigError(f"{source}:{lineno}: {e}") from None
    return out


def parse_properties_text(text: str, source: str) -> list[tuple[str, str, str]]:
    """``load_properties`` with each value's surrounding whitespace trimmed, as Kafka's
    ConfigDef trims a value before it parses it (so ``key = value `` is ``value``)."""
    return [(k, v.strip(), where) for k, v, where in load_properties(text, source)]
