"""A request that extends a remembered one reuses its translation, and only when exact.

The translator takes a request's leading messages from a remembered request
whose canonical message bytes the new ones start with (``Translator.remember``).
Reuse must give what a fresh translation gives, must not happen for messages
that are equal as Python values but differ in bytes (key order inside a tool
input, ``1`` versus ``true``), and must not skip the tool-call check for a
prefix that failed it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tapelog._errors import ProxyError
from tapelog.log import decode, encode
from tapelog.proxy import Upstream
from tapelog.proxy._body_prefix import BodyPrefixes
from tapelog.proxy._translate import SEGMENT_BYTES, Messages, Translator

from ._extending import (
    Conversation,
    Step,
    assert_refused_alike,
    assert_same_messages,
    steps_of,
    translated,
)
from ._helpers import assert_rebuilds, in_process, post, sessions_in

MODEL = "deepseek-chat"


def _translate(translator: Translator, family: str, body: dict[str, Any]) -> Messages:
    """What the proxy does with a body: parse, translate, remember."""
    parsed = translator.parse(family, decode(encode(body)))  # type: ignore[arg-type]
    found = translator.messages(parsed)
    translator.remember(found)
    return found


def _openai_turns(n: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "be brief"}]
    for i in range(n):
        messages.append({"role": "user", "content": f"question {i}"})
        call = {"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"result {i}"})
        messages.append({"role": "assistant", "content": f"answer {i}"})
    return messages


def test_an_extension_translates_as_a_fresh_translator_does() -> None:
    upstream = Upstream.resolve("deepseek", base_url="http://x")
    warm = Translator(upstream)
    messages = _openai_turns(3)
    first = _translate(warm, "openai", {"model": MODEL, "messages": messages})
    assert first.known == 0
    longer = [*messages, *_openai_turns(5)[1 + 12 :]]
    second = _translate(warm, "openai", {"model": MODEL, "messages": longer})
    assert second.known == len(first.neutral), "the remembered prefix was reused"
    assert_same_messages(
        second, _translate(Translator(upstream), "openai", {"model": MODEL, "messages": longer})
    )
    again = _translate(warm, "openai", {"model": MODEL, "messages": longer})
    assert again.known == len(second.neutral)
    assert_same_messages(again, second)


def test_an_extension_found_by_its_bytes_translates_as_a_fresh_translator_does() -> None:
    """What the proxy does with a body's bytes: the body prefix names the
    remembered messages it extends, and only the new ones are encoded."""
    upstream = Upstream.resolve("deepseek", base_url="http://x")
    warm, prefixes = Translator(upstream), BodyPrefixes()
    messages = _openai_turns(5)
    found: list[Messages] = []
    for size in (5, 9, 13, 21):
        raw = encode({"model": MODEL, "messages": messages[:size], "stream": True})
        decoded = prefixes.decode(raw)
        parsed = warm.parse("openai", decoded.body)
        found.append(warm.messages(parsed, extends=decoded.extends))
        warm.remember(found[-1])
        prefixes.remember(raw, decoded, found[-1])
        assert (decoded.extends is None) == (size == 5)
        fresh = Translator(upstream)
        assert_same_messages(found[-1], fresh.messages(fresh.parse("openai", decode(raw))))
        assert found[-1].encoded == encode(messages[1:size])  # after the system message
    assert [m.known for m in found] == [0, *(len(m.neutral) for m in found[:-1])]


_TEXT = st.text(alphabet='ab "\\\n\u00e9\U0001f600', max_size=12)
_CALL = st.builds(
    lambda i, args: {
        "id": f"c{i}",
        "type": "function",
        "function": {"name": "f", "arguments": args},
    },
    st.integers(0, 3),
    st.sampled_from(["{}", '{"a":1}', '{"b": [true]}']),
)
_OPENAI_MESSAGE = st.one_of(
    st.builds(lambda t: {"role": "user", "content": t}, _TEXT),
    st.builds(lambda t: {"role": "assistant", "content": t}, _TEXT),
    st.builds(lambda t: {"role": "system", "content": t}, _TEXT),
    st.builds(
        lambda calls: {"role": "assistant", "content": None, "tool_calls": calls},
        st.lists(_CALL, min_size=1, max_size=2),
    ),
    st.builds(
        lambda i, t: {"role": "tool", "tool_call_id": f"c{i}", "content": t},
        st.integers(0, 3),
        _TEXT,
    ),
)
_STEP = steps_of(_OPENAI_MESSAGE, ["extend", "extend", "branch", "field"])


@settings(max_examples=80, deadline=None)
@given(steps=st.lists(_STEP, min_size=1, max_size=8))
def test_incremental_translation_equals_a_full_one(
    steps: list[Step],
) -> None:
    """A run of requests as the proxy sees them (extensions found by their
    bytes, branches back to an earlier point, a leading field that changes so
    only the remembered message bytes match): every translation equals a fresh
    translator's full one, and its message bytes are the list's canonical bytes."""
    upstream = Upstream.resolve("deepseek", base_url="http://x")
    warm, prefixes = Translator(upstream), BodyPrefixes()
    conversation = Conversation()
    for step in steps:
        conversation.take(step)
        body = {
            "temperature": conversation.temperature,
            "model": MODEL,
            "messages": conversation.items,
        }
        raw = encode(body)
        fresh = Translator(upstream)
        parsed = fresh.parse("openai", decode(raw))
        decoded = prefixes.decode(raw)
        full = translated(lambda: fresh.messages(parsed))  # noqa: B023 (called at once)
        if isinstance(full, ProxyError):
            assert_refused_alike(
                full,
                lambda: warm.messages(
                    warm.parse("openai", decoded.body),  # noqa: B023
                    extends=decoded.extends,  # noqa: B023
                ),
            )
            conversation.drop(step)
            continue
        found = warm.messages(warm.parse("openai", decoded.body), extends=decoded.extends)
        warm.remember(found)
        prefixes.remember(raw, decoded, found)
        assert_same_messages(found, full)
        assert found.encoded == full.encoded == encode(parsed.messages)
        assert found.count == full.count == len(parsed.messages)


def test_an_extension_shares_the_history_bytes_it_extends() -> None:
    """The canonical bytes of a long history are kept once: a request that
    extends it holds the earlier request's parts as the same objects and
    copies only what is new (at most one open segment), never the history."""
    upstream = Upstream.resolve("deepseek", base_url="http://x")
    warm, prefixes = Translator(upstream), BodyPrefixes()
    messages = [
        {"role": ("user", "assistant")[i % 2], "content": f"{i} " + "x" * 300} for i in range(601)
    ]
    found: list[Messages] = []
    for size in (401, 403, 405, 601):
        raw = encode({"model": MODEL, "messages": messages[:size]})
        decoded = prefixes.decode(raw)
        found.append(warm.messages(warm.parse("openai", decoded.body), extends=decoded.extends))
        warm.remember(found[-1])
        prefixes.remember(raw, decoded, found[-1])
        assert found[-1].encoded == encode(messages[:size])
    first = found[0].listed
    assert len(first) == 1
    assert len(first[0]) > SEGMENT_BYTES
    for later in found[1:]:
        assert later.listed[0] is first[0]  # the history's bytes, not a copy
    assert found[2].listed[1] is not found[1].listed[1]  # the open segment grew
    assert len(found[2].listed) == 2
    assert sum(map(len, found[3].listed[1:])) < 2 * SEGMENT_BYTES


def _anthropic(input_: dict[str, Any]) -> list[dict[str, Any]]:
    use = {"type": "tool_use", "id": "t1", "name": "f", "input": input_}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": "ok"}
    return [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [use]},
        {"role": "user", "content": [result]},
        {"role": "assistant", "content": "done"},
    ]


def test_messages_equal_as_values_but_not_as_bytes_are_translated_again() -> None:
    upstream = Upstream.resolve("anthropic", base_url="http://x")
    warm = Translator(upstream)
    tail = [{"role": "user", "content": "more"}]
    body = {"model": "claude-sonnet-4-5", "max_tokens": 64}
    _translate(warm, "anthropic", {**body, "messages": _anthropic({"a": True, "b": 2})})
    # Key order inside a tool input is what the model reads: not the same message.
    reordered = [*_anthropic({"b": 2, "a": True}), *tail]
    found = _translate(warm, "anthropic", {**body, "messages": reordered})
    assert found.known == 0
    fresh = _translate(Translator(upstream), "anthropic", {**body, "messages": reordered})
    assert_same_messages(found, fresh)
    assert found.neutral[1]["content"][0]["arguments"] == '{"b":2,"a":true}'
    # ``1`` equals ``True`` in Python but is another JSON value.
    numeric = [*_anthropic({"a": 1, "b": 2}), *tail]
    assert numeric == [*_anthropic({"a": True, "b": 2}), *tail]
    found = _translate(warm, "anthropic", {**body, "messages": numeric})
    assert found.known == 0
    assert found.neutral[1]["content"][0]["arguments"] == '{"a":1,"b":2}'


async def test_a_refused_prefix_is_not_taken_as_checked(tmp_path: Path) -> None:
    """A request refused for an unanswered call is not remembered, so the same
    messages plus the result pass; an extension of a known request is still
    checked in its new part."""
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    calling = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
    ]
    answered = [*calling, {"role": "tool", "tool_call_id": "c1", "content": "ok"}]
    orphan = {"role": "tool", "tool_call_id": "c9", "content": "stray"}
    async with in_process(tmp_path) as (_, emu, http):
        refused = await post(http, "/v1/chat/completions", {"model": MODEL, "messages": calling})
        ok = await post(http, "/v1/chat/completions", {"model": MODEL, "messages": answered})
        reply = ok.json()["choices"][0]["message"]
        stray = [*answered, reply, orphan]
        refused_again = await post(
            http, "/v1/chat/completions", {"model": MODEL, "messages": stray}
        )
        extended = [*answered, reply, {"role": "user", "content": "and then?"}]
        ok_again = await post(http, "/v1/chat/completions", {"model": MODEL, "messages": extended})
    assert refused.status_code == 400
    assert "whose result does not follow it" in refused.json()["error"]["message"]
    assert ok.status_code == 200
    assert refused_again.status_code == 400
    assert "did not make" in refused_again.json()["error"]["message"]
    assert ok_again.status_code == 200
    assert len(emu.received) == 2
    sessions = sessions_in(tmp_path)
    assert len(sessions) == 1, "the extension joined the conversation"
    assert_rebuilds(sessions, emu)
