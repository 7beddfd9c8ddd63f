"""Topic and partition names, validated the way Kafka's Topic.validate does.

A topic name becomes a directory name under every log dir (``<topic>-<partition>``), so this is
also what keeps a name from escaping a log dir: only ``[a-zA-Z0-9._-]``, at most 249 characters
(255 minus room for ``-<partition>`` and Kafka's ``.<uuid>-delete`` suffixes), never ``.`` or
``..``.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from common.errors import InvalidTopicError

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


def validate_topic(name: str) -> str:
    """Return ``name`` if it is a legal topic name, else raise InvalidTopicError saying why."""
    if not isinstance(name, str) or not name:
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError(f"Topic name cannot be \"{name}\"")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicError(f"Topic name is illegal, it can't be longer than "
                                f"{MAX_TOPIC_NAME_LENGTH} characters, topic name: {name[:40]}...")
    if not _LEGAL.fullmatch(name):
        raise InvalidTopicError(f"Topic name \"{name}\" is illegal, it contains a character other "
                                f"than ASCII alphanumerics, '.', '_' and '-'")
    return name


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def dir_name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @classmethod
    def parse(cls, text: str) -> TopicPartition:
        """Parse ``topic-N`` (a partition dir name or a CLI argument)."""
        topic, sep, part = text.rpartition("-")
        # ASCII digits only: str.isdigit() also takes '²' (which int() refuses) and '١'
        # (which int() reads as 1, naming a partition the dir name does not spell)
        if not sep or not part.isascii() or not part.isdigit():
            raise InvalidTopicError(f"\"{text}\" is not of the form <topic>-<partition>")
        return cls(validate_topic(topic), int(part))


def ascii_digits(text: str) -> bool:
    """A non-empty run of ASCII digits: what may be read as a number from a znode name, a file
    name or a config value. str.isdigit() also takes '²' (which int() refuses with a bare
    ValueError) and '١' (which int() reads as 1)."""
    return text.isascii() and text.isdigit()


def validate_partition(p: int) -> int:
    if not isinstance(p, int) or isinstance(p, bool) or p < 0:
        raise InvalidTopicError(f"partition must be a non-negative integer, got {p!r}")
    return p
