"""Decoding a body from the recent body it extends gives what a full parse gives.

Whatever the formatting (compact, spaced, indented, ASCII-escaped), the key
order, duplicated keys or garbage after a known prefix, ``BodyPrefixes``
returns the same value with the same key order as ``orjson.loads`` of the
whole body, or the same refusal; and for an ordinary extension it parses only
the new part.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tapelog._errors import JsonValueError
from tapelog.log import decode
from tapelog.proxy._body_prefix import BodyPrefixes, Decoded

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
_MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "tool", '[]{}"\\']), "content": _VALUES}
)
_KEYS = st.sampled_from(["model", "stream", "tools", "n", "x", "messages"])
_FIELDS = st.lists(st.tuples(_KEYS, _VALUES), max_size=3)
_STYLES = st.sampled_from(
    [
        {"separators": (",", ":")},
        {"separators": (", ", ": ")},
        {"indent": 1},
        {"separators": (",", ":"), "ensure_ascii": False},
    ]
)


def _body(
    head: list[tuple[str, Any]],
    messages: list[Any],
    rest: list[tuple[str, Any]],
    style: dict[str, Any],
) -> bytes:
    """A body written as a client writes it, key pairs in order (repeats kept)."""
    item, key = style.get("separators", (", ", ": "))
    pairs = [*head, ("messages", messages), *rest]
    text = item.join(json.dumps(k) + key + json.dumps(v, **style) for k, v in pairs)
    return ("{" + text + "}").encode()


def _same(found: Decoded | Exception, raw: bytes) -> None:
    try:
        expected = orjson.loads(raw)
    except orjson.JSONDecodeError:
        assert isinstance(found, JsonValueError)
        return
    assert isinstance(found, Decoded), found
    assert orjson.dumps(found.body) == orjson.dumps(expected)


def _decode(prefixes: BodyPrefixes, raw: bytes) -> Decoded | Exception:
    try:
        return prefixes.decode(raw)
    except JsonValueError as exc:
        return exc


@settings(max_examples=60, deadline=None)
@given(
    head=_FIELDS,
    rest=_FIELDS,
    later=_FIELDS,
    first=st.lists(_MESSAGE, min_size=1, max_size=4),
    added=st.lists(_MESSAGE, max_size=3),
    style=_STYLES,
)
def test_an_extension_decodes_as_the_whole_body(
    head: list[tuple[str, Any]],
    rest: list[tuple[str, Any]],
    later: list[tuple[str, Any]],
    first: list[Any],
    added: list[Any],
    style: dict[str, Any],
) -> None:
    prefixes = BodyPrefixes()
    raw = _body(head, first, rest, style)
    decoded = prefixes.decode(raw)
    _same(decoded, raw)
    prefixes.remember(raw, decoded)
    extended = _body(head, first + added, later, style)
    found = _decode(prefixes, extended)
    _same(found, extended)
    clean = all(
        "messages" not in keys and len(set(keys)) == len(keys)
        for keys in ([k for k, _ in head + rest], [k for k, _ in head + later])
    )
    if clean:  # nothing to doubt: only the new part was parsed
        assert isinstance(found, Decoded)
        assert found.fresh == {"messages": added, **dict(later)}


@settings(max_examples=120, deadline=None)
@given(
    first=st.lists(_MESSAGE, min_size=1, max_size=3),
    tail=st.text(alphabet=' ,:[]{}"\\0aen\n', max_size=24),
)
def test_any_bytes_after_a_known_prefix_decode_or_fail_as_the_whole_body(
    first: list[Any], tail: str
) -> None:
    prefixes = BodyPrefixes()
    raw = _body([("model", "m")], first, [("stream", True)], {"separators": (",", ":")})
    decoded = prefixes.decode(raw)
    prefixes.remember(raw, decoded)
    assert decoded.end is not None
    mutated = raw[: decoded.end] + tail.encode()
    _same(_decode(prefixes, mutated), mutated)


def test_the_last_message_end_is_found_in_each_format() -> None:
    messages = [{"role": "user", "content": 'a ] } " \\ ['}, {"role": "assistant", "content": []}]
    for style in ({"separators": (",", ":")}, {"indent": 2}):
        raw = _body([("model", "m")], messages, [("tools", [])], style)
        end = BodyPrefixes().decode(raw).end
        assert end is not None
        assert raw[:end].endswith(b"}")
        assert decode(raw[:end] + b"]}")["messages"] == messages


@pytest.mark.parametrize(
    "raw",
    [
        b'{"messages":[{"role":"user"}],"messages":[]}',  # given twice
        b'{"messages":{"role":"user"}}',  # no list
        b'{"messages":"[1]"}',
        b"[1,2]",
    ],
)
def test_bodies_the_shortcut_is_not_sure_of_are_not_kept(raw: bytes) -> None:
    prefixes = BodyPrefixes()
    decoded = prefixes.decode(raw)
    prefixes.remember(raw, decoded)
    assert decoded.end is None
    assert decoded.fresh is decoded.body


def test_an_extension_takes_the_place_of_the_body_it_extends() -> None:
    """One kept body per conversation: a busy conversation does not push the
    others' bodies out."""
    prefixes = BodyPrefixes()
    talks = [[{"role": "user", "content": f"talk {t}"}] for t in range(4)]

    def send(talk: list[Any]) -> Decoded:
        talk.append({"role": "user", "content": len(talk)})
        raw = _body([("model", "m")], talk, [], {"separators": (",", ":")})
        decoded = prefixes.decode(raw)
        prefixes.remember(raw, decoded, note=len(talk))
        return decoded

    assert all(send(talk).extends is None for talk in talks)
    assert all(send(talks[0]).extends is not None for _ in range(6))
    assert all(send(talk).extends is not None for talk in talks)
