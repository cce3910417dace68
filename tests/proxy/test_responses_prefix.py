"""A Responses request that extends an earlier one groups and translates only its new items.

The Responses API's growing list is ``input``: its items are grouped into the
proxy's client messages (``_responses_in.group_items``: a run of output items
is one assistant group, a function call output a tool group that is a tool
result when its call is in the input). A body whose bytes extend a recent
body's (``_body_prefix``, keyed on ``input``) reuses that body's groups and
translation for the items it already had (``grow_groups``), unless a new item
would change a known group: an output item that joins the last known run, or
a bare function call whose id a known output names. Either way the result
must equal a fresh, full grouping and translation.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tapelog._errors import ProxyError
from tapelog.log import decode, encode
from tapelog.proxy import Upstream
from tapelog.proxy._body_prefix import FamilyPrefixes
from tapelog.proxy._translate import Messages, Translator

from ._extending import (
    Conversation,
    Step,
    assert_refused_alike,
    assert_same_messages,
    steps_of,
    translated,
)

MODEL = "gpt-5"
_UPSTREAM = Upstream.resolve("openai", base_url="http://x")


def _same(a: Messages, b: Messages) -> None:
    assert_same_messages(a, b)
    assert a.encoded == b.encoded
    assert a.count == b.count


class Warm:
    """The proxy's path: body prefixes and one translator, request after request."""

    def __init__(self) -> None:
        self.translator = Translator(_UPSTREAM)
        self.prefixes = FamilyPrefixes()

    def translate(self, raw: bytes) -> tuple[Messages, bool]:
        """The messages of a body, and whether its groups were grown from a known body's."""
        prefixes = self.prefixes.of("responses")
        decoded = prefixes.decode(raw)
        parsed = self.translator.parse("responses", decoded.body, extends=decoded.extends)
        found = self.translator.messages(parsed, extends=decoded.extends)
        self.translator.remember(found)
        prefixes.remember(raw, decoded, found)
        return found, parsed.grouped.grown


def _fresh(raw: bytes) -> Messages:
    translator = Translator(_UPSTREAM)
    return translator.messages(translator.parse("responses", decode(raw)))


def _user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def _said(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text}],
    }


def _call(i: int) -> dict[str, Any]:
    return {"type": "function_call", "call_id": f"c{i}", "name": "f", "arguments": "{}"}


def _output(i: int) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": f"c{i}", "output": "ok"}


def _body(items: list[dict[str, Any]], temperature: int = 0) -> bytes:
    return encode({"model": MODEL, "temperature": temperature, "input": items, "stream": True})


def test_an_extension_is_grown_and_a_joining_output_item_groups_again() -> None:
    warm = Warm()
    items = [_user("hi"), _call(1), _output(1), _said("done"), _user("more")]
    found, grown = warm.translate(_body(items[:3]))
    assert not grown
    found, grown = warm.translate(_body(items))
    assert grown
    assert found.known == 3  # the user, the call's run and its output: taken as they were
    _same(found, _fresh(_body(items)))
    # The last known group is a run of output items and the new first item joins it.
    items += [_said("a"), _said("b")]
    found, grown = warm.translate(_body(items))
    assert grown  # the last known item was a user message: nothing joins
    items += [_said("c")]
    found, grown = warm.translate(_body(items))
    assert not grown
    _same(found, _fresh(_body(items)))


def test_a_new_call_for_a_known_output_groups_again() -> None:
    """An output whose call is not in the input is kept as an item; a later
    call with its id makes it a tool result, so the known groups change."""
    warm = Warm()
    items = [_user("hi"), _output(7), _user("go on")]
    warm.translate(_body(items))
    items += [_call(7), _output(7)]
    found, grown = warm.translate(_body(items))
    assert not grown
    _same(found, _fresh(_body(items)))


_TEXT = st.text(alphabet='ab "\\\n\u00e9', max_size=8)
_ITEM = st.one_of(
    st.builds(_user, _TEXT),
    st.builds(lambda t: {"role": "user", "content": t}, _TEXT),
    st.builds(_said, _TEXT),
    st.builds(
        lambda t: {"type": "reasoning", "summary": [{"type": "summary_text", "text": t}]}, _TEXT
    ),
    st.builds(_call, st.integers(0, 3)),
    st.builds(_output, st.integers(0, 3)),
    st.builds(lambda i: {**_call(i), "id": f"fc{i}"}, st.integers(0, 3)),
    st.builds(lambda t: {"type": "message", "role": "developer", "content": t}, _TEXT),
)
_STEP = steps_of(_ITEM, ["extend", "extend", "extend", "branch", "field"])


@settings(max_examples=120, deadline=None)
@given(steps=st.lists(_STEP, min_size=1, max_size=8))
def test_incremental_grouping_and_translation_equal_a_full_one(
    steps: list[Step],
) -> None:
    """A run of Responses requests as the proxy sees them (extensions found
    by their bytes, branches back to an earlier point, a leading field that
    changes): every grouping and translation equals a fresh full one, and a
    body refused whole is refused as an extension too, with the same words."""
    warm = Warm()
    conversation = Conversation()
    for step in steps:
        conversation.take(step)
        raw = _body(conversation.items, conversation.temperature)
        full = translated(lambda: _fresh(raw))  # noqa: B023 (called at once)
        if isinstance(full, ProxyError):
            assert_refused_alike(full, lambda: warm.translate(raw))  # noqa: B023
            conversation.drop(step)
            continue
        found, _ = warm.translate(raw)
        _same(found, full)
        fresh = Translator(_UPSTREAM).parse("responses", decode(raw))
        assert found.grouped.groups == fresh.grouped.groups
