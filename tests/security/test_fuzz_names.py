"""Topic and partition names (common/names.py) fuzzed: a name becomes a directory under every
log dir, so what validate_topic accepts must be Kafka's legal set and nothing else, and
parsing ``<topic>-<partition>`` (a partition dir, a CLI argument) raises only
InvalidTopicError."""
from __future__ import annotations

import re

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from common.errors import InvalidTopicError
from common.names import MAX_TOPIC_NAME_LENGTH, TopicPartition, validate_topic
from tests.security.fuzzing import FUZZ

_NAME_CHARS = st.sampled_from("abcXYZ019._-/ \x00é²١")


@FUZZ
@given(name=st.text(_NAME_CHARS, max_size=260) | st.text(max_size=40))
@example(name="x" * 249)
@example(name="x" * 250)
def test_only_kafkas_legal_names_are_accepted(name):
    try:
        assert validate_topic(name) == name
    except InvalidTopicError as e:
        assert str(e)
        return
    assert re.fullmatch(r"[a-zA-Z0-9._-]{1,249}", name) and name not in (".", "..")
    assert len(name) <= MAX_TOPIC_NAME_LENGTH


@FUZZ
@given(text=st.text(_NAME_CHARS, max_size=40))
@example(text="t-²")
@example(text="t-١")
def test_partition_dir_names_parse_or_raise_invalid_topic(text):
    try:
        tp = TopicPartition.parse(text)
    except InvalidTopicError:
        return
    assert tp.partition >= 0 and TopicPartition.parse(tp.dir_name) == tp


@pytest.mark.parametrize("text", ["t-²", "t-١", "t-0x1", "t- 1"])
def test_what_the_fuzzing_found_a_non_ascii_digit_is_no_partition(text):
    """'²'.isdigit() is True and int('²') raises a bare ValueError; '١' is a digit int()
    reads as 1, so 't-١' named partition 1 while its dir name was not 't-1'."""
    with pytest.raises(InvalidTopicError):
        TopicPartition.parse(text)
