"""Properties of the edit classification (``tapelog.audit._edits``): what a client
changed in a message it sent again, named the way people fix it."""

from __future__ import annotations

import json
import unicodedata
from datetime import UTC, datetime
from typing import Any

from hypothesis import assume, given
from hypothesis import strategies as st

from tapelog.audit._edits import (
    EXCERPT_CHARS,
    TIMESTAMP,
    diff_excerpts,
    excerpt,
    message_change,
    same_json_value,
    text_change,
)
from tapelog.audit._history_edits import history_changes

valid_text = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=12)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | valid_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(valid_text, inner, max_size=4),
    max_leaves=20,
)


@st.composite
def serializations(draw: st.DrawFn, value: Any) -> str:
    """``value`` as some JSON writer would send it: spacing, key order, escapes, indent."""
    return json.dumps(
        value,
        separators=draw(st.sampled_from([(",", ":"), (", ", ": "), (",", ": ")])),
        sort_keys=draw(st.booleans()),
        ensure_ascii=draw(st.booleans()),
        indent=draw(st.sampled_from([None, 2])),
    )


def _same_value(a: Any, b: Any) -> bool:
    """JSON value equality, independently of the module: numbers by value, key order ignored."""

    def norm(v: Any) -> Any:
        if isinstance(v, bool) or v is None or isinstance(v, str):
            return [type(v).__name__, v]
        if isinstance(v, int | float):
            return ["n", float(v) if isinstance(v, int) and abs(v) < 2**53 else v]
        if isinstance(v, list):
            return ["a", [norm(x) for x in v]]
        return ["o", sorted([k, norm(x)] for k, x in v.items())]

    return bool(norm(a) == norm(b))


def _call_message(arguments: str, *, thinking: bool = False) -> dict[str, Any]:
    content: list[dict[str, Any]] = [
        {"type": "tool_call", "id": "call_1", "name": "search", "arguments": arguments}
    ]
    if thinking:
        content.insert(0, {"type": "reasoning", "text": "Let me think."})
    return {"role": "assistant", "content": content}


@given(json_values, st.data())
def test_re_serialized_arguments_are_never_an_edit(value: Any, data: st.DataObject) -> None:
    old = data.draw(serializations(value))
    new = data.draw(serializations(value))
    assume(old != new)
    change = message_change(_call_message(old), _call_message(new), message=2, seq=1, by=9)
    assert change is not None
    assert change.what == "arguments-reserialized"
    assert change.field == "content[0].arguments"
    assert change.extra == {"tool": "search", "call_id": "call_1"}
    assert change.also == ()


@given(json_values, json_values)
def test_other_arguments_are_never_a_re_serialization(a: Any, b: Any) -> None:
    assume(not _same_value(a, b))
    old, new = json.dumps(a), json.dumps(b)
    assert not same_json_value(old, new)
    change = message_change(_call_message(old), _call_message(new), message=2, seq=1, by=9)
    assert change is not None
    assert change.what != "arguments-reserialized"


def test_text_that_is_not_json_is_an_edit() -> None:
    change = message_change(
        _call_message('{"a": 1'), _call_message('{"a":1'), message=1, seq=1, by=2
    )
    assert change is not None
    assert change.what == "content-edited"


# --- timestamps ----------------------------------------------------------------------------

FORMATS = [
    "%Y-%m-%d",
    "%Y-%m-%d %H:%M",
    "%Y-%m-%d %H:%M:%S",
    "%Y-%m-%dT%H:%M:%SZ",
    "%H:%M",
    "%H:%M:%S",
    "%I:%M %p",
    "%a, %d %b %Y %H:%M:%S GMT",
    "%A %B %d, %Y",
    "%B %d, %Y at %I:%M %p",
    "%d %B %Y",
    "%d/%m/%Y",
    "%m/%d/%y",
    "%d.%m.%Y",
    "%c",
    "%A",
]
moments = st.datetimes(min_value=datetime(2001, 9, 10), max_value=datetime(2033, 5, 17))


def _render(moment: datetime, fmt: str) -> str:
    if fmt == "iso":
        return moment.isoformat()
    if fmt == "epoch":
        return str(int(moment.replace(tzinfo=UTC).timestamp()))
    if fmt == "epoch-ms":
        return str(int(moment.replace(tzinfo=UTC).timestamp() * 1000))
    return moment.strftime(fmt)


formats = st.sampled_from([*FORMATS, "iso", "epoch", "epoch-ms"])
# Surrounding words: no digits or capitals, so they cannot merge into a date token.
words = st.text(alphabet="abcdefghij klmnop,.;()!?-", max_size=30)


@given(moments, formats)
def test_common_date_and_time_renderings_are_one_timestamp_token(
    moment: datetime, fmt: str
) -> None:
    rendered = _render(moment, fmt)
    assert TIMESTAMP.fullmatch(rendered), rendered


@given(moments, moments, formats, words, words)
def test_a_changed_clock_is_a_timestamp_change(
    a: datetime, b: datetime, fmt: str, before: str, after: str
) -> None:
    old, new = _render(a, fmt), _render(b, fmt)
    assume(old != new)
    change = text_change(f"{before} {old} {after}", f"{before} {new} {after}")
    assert change is not None
    assert (change.what, change.old, change.new) == ("timestamp", old, new)


@given(moments, words, st.sampled_from(["apples", "pears", "plums"]))
def test_a_changed_word_next_to_a_timestamp_is_an_edit(
    moment: datetime, before: str, fruit: str
) -> None:
    stamp = moment.isoformat()
    change = text_change(f"{before} {stamp} 3 apples", f"{before} {stamp} 3 {fruit}x")
    assert change is not None
    assert change.what == "edited"


# --- excerpts ------------------------------------------------------------------------------

any_text = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=400)


def _printable(text: str) -> bool:
    return all(unicodedata.category(c) not in ("Cc", "Cf", "Zl", "Zp") for c in text)


@given(any_text, st.integers(min_value=8, max_value=200))
def test_excerpts_are_bounded_and_printable(text: str, limit: int) -> None:
    shown = excerpt(text, limit)
    assert len(shown) <= limit
    assert _printable(shown)
    if len(text) <= limit and _printable(text):
        assert shown == text


@given(any_text, any_text)
def test_diff_excerpts_are_bounded_and_printable(old: str, new: str) -> None:
    for shown in diff_excerpts(old, new):
        assert len(shown) <= EXCERPT_CHARS
        assert _printable(shown)


def test_diff_excerpts_show_the_change_with_context() -> None:
    old = "x" * 100 + " the cat sat " + "y" * 100
    new = "x" * 100 + " the dog sat " + "y" * 100
    a, b = diff_excerpts(old, new)
    assert "cat" in a
    assert "dog" in b
    assert a.startswith("…")
    assert a.endswith("…")


# --- histories -----------------------------------------------------------------------------


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


texts = st.lists(st.text(alphabet="abcdefgh ", min_size=1, max_size=8), min_size=1, max_size=12)


def _nodes(items: list[str], first_seq: int) -> list[tuple[int, dict[str, Any]]]:
    return [(first_seq + i, _user(f"{i}:{t}")) for i, t in enumerate(items)]


@given(texts, texts, st.integers(min_value=0, max_value=3))
def test_a_history_that_only_grew_has_no_edits(old: list[str], more: list[str], base: int) -> None:
    before = _nodes(old, 0)
    grown = before + _nodes(more, 200)
    assert history_changes(before, grown, old_base=base, new_base=base).total == 0
    # Resent unchanged (logged again as new nodes, as after a replace), then more.
    resent = [(100 + s, m) for s, m in before] + _nodes(more, 200)
    assert history_changes(before, resent, old_base=base, new_base=base).changes == ()


@given(texts, st.data(), st.integers(min_value=0, max_value=3))
def test_one_edited_message_is_found_at_its_position(
    old: list[str], data: st.DataObject, base: int
) -> None:
    before = _nodes(old, 0)
    k = data.draw(st.integers(min_value=0, max_value=len(old) - 1))
    after = [(s if i < k else 100 + s, m) for i, (s, m) in enumerate(before)]
    after[k] = (100 + k, _user(f"{k}:edited {old[k]}"))
    after += _nodes(["new"], 300)
    [change] = history_changes(before, after, old_base=base, new_base=base).changes
    assert (change.message, change.seq, change.by) == (base + k + 1, k, 100 + k)
    assert change.what == "content-edited"
    assert change.field == "content[0].text"


@given(texts, st.data())
def test_a_removed_message_is_found_at_its_old_position(
    old: list[str], data: st.DataObject
) -> None:
    assume(len(old) >= 2)
    before = _nodes(old, 0)
    k = data.draw(st.integers(min_value=0, max_value=len(old) - 2))
    after = before[:k] + [(100 + s, m) for s, m in before[k + 1 :]] + _nodes(["new"], 300)
    [change] = history_changes(before, after).changes
    assert (change.what, change.message, change.seq, change.by) == ("removed", k + 1, k, None)


def test_dropped_reasoning_alongside_re_serialized_arguments() -> None:
    old = _call_message('{"a": 1, "b": [true, null]}', thinking=True)
    new = _call_message('{"b":[true,null],"a":1}')
    change = message_change(old, new, message=4, seq=7, by=19)
    assert change is not None
    assert (change.what, change.field, change.old) == (
        "reasoning-dropped",
        "content[0]",
        "Let me think.",
    )
    assert change.extra == {"blocks": 1}
    assert change.also == ("arguments-reserialized",)
    assert change.to_json()["also"] == ["arguments-reserialized"]


def test_a_changed_role_and_a_key_order_change_are_edits() -> None:
    role = message_change(
        _user("a"), {"role": "assistant", "content": _user("a")["content"]}, message=1, seq=1, by=2
    )
    assert role is not None
    assert (role.what, role.field) == ("content-edited", "role")
    reordered = {"role": "user", "content": [{"text": "a", "type": "text"}]}
    order = message_change(_user("a"), reordered, message=1, seq=1, by=2)
    assert order is not None
    assert (order.what, order.field) == ("content-edited", "content[0]")


def test_many_alike_messages_align_in_linear_time_and_only_the_limit_is_classified() -> None:
    before = [(i, _user("ok")) for i in range(20_000)]
    after = [(i, m) for i, m in before[:5]] + [(50_000 + i, m) for i, m in before[5:]]
    after[5] = (50_005, _user("edited"))
    after += [(90_000, _user("ok"))]
    found = history_changes(before, after)
    assert [(c.message, c.what) for c in found.changes] == [(6, "content-edited")]
    everything = [(50_000 + i, _user(f"other {i}")) for i in range(3_000)]
    capped = history_changes(before[:3_000], everything, limit=10)
    assert (len(capped.changes), capped.total) == (10, 3_000)
    assert [c.message for c in capped.changes] == list(range(1, 11))
