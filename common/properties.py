"""java.util.Properties-style text (``key=value`` lines, ``#`` and ``!`` comments), as Kafka's
tools and server.properties use it: read by the process configuration (common/config.py) and by
client property files (``--command-config``, common/security/tls.py) alike."""

from __future__ import annotations

from common.errors import ConfigError


def parse_properties_text(text: str, source: str) -> list[tuple[str, str, str]]:
    """(key, raw value, where) triples from java.util.Properties-style text."""
    out = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        if "=" not in line:
            raise ConfigError(f"{source}:{lineno}: expected key=value, got {line!r}")
        k, v = line.split("=", 1)
        out.append((k.strip(), v.strip(), f"{source}:{lineno}"))
    return out
