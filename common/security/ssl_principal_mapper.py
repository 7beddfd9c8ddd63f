"""``ssl.principal.mapping.rules``: Kafka's SslPrincipalMapper (KIP-371), a pure parser and applier.

A TLS client's principal name is its certificate's distinguished name (RFC 2253 form,
``CN=alice,OU=eng,O=org``) passed through the first rule that matches:

- ``DEFAULT``: the distinguished name unchanged (the whole list's default);
- ``RULE:pattern/replacement/``, ``RULE:pattern/replacement/L`` or ``/U``: when ``pattern`` (a
  regular expression) matches the whole name, the name with every match replaced by
  ``replacement`` (``$1`` names a group), lower- or upper-cased with ``L``/``U``.

Rules are comma-separated; ``\\`` escapes a ``/`` or a ``,`` inside a pattern. A name no rule
matches is refused (Kafka's NoMatchingRule: the connection fails authentication).

The splitting and parsing regular expressions are Kafka's own (SslPrincipalMapper.RULE_PATTERN,
RULE_SPLITTER), so a rule list Kafka accepts is accepted here and splits the same way; the
replacement follows java.util.regex.Matcher.replaceAll, with Kafka's escaping of back references
to groups the pattern does not have. Patterns are Python regular expressions, which agree with
Java's for the constructs rules use (groups, classes, lazy quantifiers, anchors).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_RULES = "DEFAULT"

# Kafka's SslPrincipalMapper.RULE_PATTERN and RULE_SPLITTER, verbatim.
_RULE_PATTERN = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE_PATTERN + r")\s*(,\s*|$)")
_RULE_PARSER = re.compile(_RULE_PATTERN)


class NoMatchingRule(ValueError):
    """No rule applies to a distinguished name (Kafka's SslPrincipalMapper.NoMatchingRule)."""


@dataclass(frozen=True)
class Rule:
    """One rule; ``DEFAULT`` when ``is_default``."""

    is_default: bool = False
    pattern: str = ""
    replacement: str = ""
    to_lower: bool = False
    to_upper: bool = False

    def __str__(self) -> str:  # Kafka's Rule.toString
        if self.is_default:
            return "DEFAULT"
        return "RULE:" + self.pattern + "/" + self.replacement + \
            ("/L" if self.to_lower else "/U" if self.to_upper else "")

    def apply(self, dn: str) -> str | None:
        """The mapped name, or None when the pattern does not match the whole ``dn``."""
        if self.is_default:
            return dn
        regex = re.compile(self.pattern)
        if regex.fullmatch(dn) is None:
            return None
        # Matcher.replaceAll: every match in the name is replaced, not only the whole-name one
        # (a pattern that can match empty also matches at the end, as in Java).
        out = regex.sub(lambda m: _java_replacement(self.replacement, m), dn)
        if self.to_lower:
            return out.lower()
        return out.upper() if self.to_upper else out


def _java_replacement(replacement: str, m: re.Match) -> str:
    """java.util.regex.Matcher.appendReplacement's reading of ``replacement`` for match ``m``:
    ``\\x`` is ``x``; ``$n`` is group n, taking further digits while the group exists. A
    back reference to a group the pattern lacks is literal text (Kafka escapes those:
    SslPrincipalMapper.escapeLiteralBackReferences)."""
    groups = m.re.groups
    out: list[str] = []
    i, n = 0, len(replacement)
    while i < n:
        c = replacement[i]
        if c == "\\" and i + 1 < n:
            out.append(replacement[i + 1])
            i += 2
            continue
        if c == "$" and i + 1 < n and replacement[i + 1].isdigit():
            j = i + 1
            num = int(replacement[j])
            if num > groups and replacement[j] != "0" and groups > 0:
                out.append("$")  # Kafka: "$<no such group>" stays as written
                i += 1
                continue
            j += 1
            while j < n and replacement[j].isdigit() and int(replacement[i + 1:j + 1]) <= groups:
                num = int(replacement[i + 1:j + 1])
                j += 1
            if num > groups:
                raise ValueError(f"No group {num}")  # Java: IndexOutOfBoundsException
            out.append(m.group(num) or "")
            i = j
            continue
        out.append(c)
        i += 1
    return "".join(out)


def split_rules(text: str | None) -> list[str]:
    """The rule strings of ``ssl.principal.mapping.rules`` (Kafka's splitRules)."""
    if text is None:
        text = DEFAULT_RULES
    return [m.group(1) for m in _RULE_SPLITTER.finditer(text.strip())]


def parse_rules(rules: list[str]) -> list[Rule]:
    """Kafka's parseRules: empty entries are ignored; anything else not a rule is refused."""
    out = []
    for rule in rules:
        m = _RULE_PARSER.match(rule)
        if m is None:
            raise ValueError(f"Invalid rule: {rule}")
        if m.end() != len(rule):
            raise ValueError(f"Invalid rule: `{rule}`, unmatched substring: "
                             f"`{rule[m.end():]}`")
        if m.group(1) is not None:
            out.append(Rule(is_default=True))
        elif m.group(2) is not None:
            try:
                re.compile(m.group(2))
            except re.error as e:
                raise ValueError(f"Invalid rule: {rule}: {e}") from None
            out.append(Rule(False, m.group(2), m.group(4), m.group(6) == "L",
                            m.group(6) == "U"))
    return out


class SslPrincipalMapper:
    """``SslPrincipalMapper.fromRules(text).getName(dn)``."""

    def __init__(self, rules: list[Rule]):
        self.rules = rules

    @classmethod
    def from_rules(cls, text: str | None) -> SslPrincipalMapper:
        return cls(parse_rules(split_rules(text)))

    def get_name(self, dn: str) -> str:
        for rule in self.rules:
            name = rule.apply(dn)
            if name is not None:
                return name
        raise NoMatchingRule(f"No rules apply to {dn}, rules "
                             f"[{', '.join(str(r) for r in self.rules)}]")

    def __str__(self) -> str:
        return "[" + ", ".join(str(r) for r in self.rules) + "]"


def parse_mapping_rules(text: str) -> str:
    """The config value check: rules Kafka would accept, kept as text."""
    SslPrincipalMapper.from_rules(text)
    return text.strip()
