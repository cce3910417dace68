"""The cache identities built in C (sorted-key encoding) equal the Python envelope walk.

``openai_message_source`` and ``anthropic_block_source`` take a fast path when no
opaque key (``parameters``, ``input_schema``, ``input``) or dropped key
(``cache_control``) occurs in a value; these properties check that the fast
path gives the very bytes the walk gives, on any JSON value, including keys
whose code points sort differently by UTF-16 and by UTF-8 and strings that
contain the marker bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tapelog.cache._segments import (
    _envelope,
    _without,
    anthropic_block_source,
    estimate_bytes,
    openai_message_source,
)
from tapelog.log import encode
from tapelog.log._api import freeze

_KEYS = st.one_of(
    st.sampled_from(
        ["role", "content", "input", "parameters", "input_schema", "cache_control", "b", "a"]
    ),
    st.text(max_size=4),
    st.sampled_from(["\uffff", "\U0001f600", "é", "Z", '"input":']),
)
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**53), 2**53),
    st.sampled_from(["", '"input":', '"cache_control":', "x"]),
    st.text(max_size=8),
)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_KEYS, inner, max_size=5)),
    max_leaves=25,
)
_OBJECTS = st.dictionaries(_KEYS, _JSON, max_size=6)


def _slow_message(message: Any) -> bytes:
    """What ``openai_message_source`` computed before the fast path (the reference)."""
    if isinstance(message, Mapping):
        kept = {k: v for k, v in message.items() if k == "role" or v not in (None, "", [])}
        return encode({"message": _envelope(kept)})
    return encode({"message": message})


@settings(max_examples=150, deadline=None)
@given(st.one_of(_OBJECTS, _JSON))
def test_a_message_identity_equals_the_envelope_walk(value: Any) -> None:
    message = freeze(value)
    source = openai_message_source(message)
    assert source.identity == _slow_message(message)
    assert source.tokens == estimate_bytes(encode(message))


@settings(max_examples=150, deadline=None)
@given(st.one_of(_OBJECTS, _JSON), st.sampled_from(["user", "assistant"]), st.booleans())
def test_a_block_identity_equals_the_envelope_walk(value: Any, role: str, opens: bool) -> None:
    block = freeze(value)
    bare = _without(block, "cache_control")
    drop = frozenset({"cache_control"})
    expected = encode({"block": _envelope(bare, drop=drop), "role": role, "opens": opens})
    source = anthropic_block_source(block, role=role, opens=opens)
    assert source.identity == expected
    assert source.tokens == estimate_bytes(encode(bare))
