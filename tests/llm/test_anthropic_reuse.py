"""The Anthropic wire reuses the previous request's leading wire messages.

Within one session a request repeats the groups of the previous one up to the
first group that may differ (the last group, which may still grow, and the
groups holding breakpoints). These tests grow histories step by step and check
the bytes against a straight encode at every step, and that a step encodes
only what is new.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tapelog.llm import LlmRequest
from tapelog.llm._api import AnthropicWire, BodyCache
from tapelog.log import encode

from ._requests import call, make_request, text, tool_result

words = st.text(min_size=0, max_size=6)  # empty texts are not cacheable: breakpoints move
assistant_blocks = st.one_of(
    words.map(lambda t: {"type": "text", "text": t}),
    st.builds(lambda t, s: {"type": "reasoning", "text": t, "signature": s}, words, words),
    words.map(lambda d: {"type": "reasoning", "text": "", "data": d}),
    # Reasoning without a signature is not sent: a message of only that maps to nothing.
    words.map(lambda t: {"type": "reasoning", "text": t}),
    st.integers(0, 9).map(lambda i: call(f"c{i}")),
)
messages = st.one_of(
    words.map(lambda t: text("user", t)),
    st.lists(assistant_blocks, min_size=1, max_size=3).map(
        lambda blocks: {"role": "assistant", "content": blocks}
    ),
    st.builds(
        lambda i, t, e: tool_result(f"c{i}", t, is_error=e), st.integers(0, 9), words, st.booleans()
    ),
)
# A step appends a few messages (same roles in a row merge into one wire
# message), or replaces a range of nodes with at most one new node.
appends = st.tuples(st.just("append"), st.lists(messages, min_size=1, max_size=3))
replaces = st.tuples(
    st.just("replace"), st.integers(0, 40), st.integers(0, 3), st.lists(messages, max_size=1)
)
prefixes = st.lists(st.sampled_from([text("user", "Context."), text("assistant", "Noted.")]))


def _request(prefix: list[Any], nodes: list[tuple[int, Any]], session: str = "s1") -> LlmRequest:
    request = make_request(
        [m for _, m in nodes],
        provider="anthropic",
        prefix=prefix,
        seqs=[seq for seq, _ in nodes],
    )
    return replace(request, session_id=session)


@settings(max_examples=120, deadline=None)
@given(prefix=prefixes, steps=st.lists(st.one_of(appends, appends, replaces), max_size=14))
def test_reused_wire_messages_give_the_bytes_of_a_straight_encode_at_every_step(
    prefix: list[Any], steps: list[Any]
) -> None:
    wire = AnthropicWire()
    cache = BodyCache()
    nodes: list[tuple[int, Any]] = []
    seq = 10
    for step in steps:
        if step[0] == "append":
            added = step[1]
        else:
            _, at, width, added = step
            at %= len(nodes) + 1
            del nodes[at : at + width]
            nodes[at:at] = [(seq + k, m) for k, m in enumerate(added)]
            added = []
        nodes.extend((seq + k, m) for k, m in enumerate(added))
        seq += 10
        # Each request is built from fresh copies: nothing may hang on identity.
        request = _request(prefix, nodes)
        cached = wire.encode_body(request, cache=cache)
        assert cached == wire.encode_body(request)
        assert cached == encode(wire.build_body(request))


def _tool_turns(count: int, start: int = 0) -> list[Any]:
    out: list[Any] = []
    for k in range(start, start + count):
        out += [{"role": "assistant", "content": [call(f"c{k}")]}, tool_result(f"c{k}", "ok")]
    return out


def test_the_next_request_encodes_only_its_new_messages() -> None:
    wire = AnthropicWire()
    cache = BodyCache()
    history = [text("user", "q"), *_tool_turns(20)]
    nodes = list(enumerate(history, start=1))
    assert wire.encode_body(_request([], nodes), cache=cache) == wire.encode_body(
        _request([], nodes)
    )
    assert (cache.hits, cache.misses) == (0, 41)
    grown = nodes + list(enumerate(_tool_turns(1, start=20), start=42))
    body = wire.encode_body(_request([], grown), cache=cache)
    assert body == wire.encode_body(_request([], grown))
    # Two new nodes encoded; of the old ones only the three from the group that
    # held the previous request's read breakpoint on are looked up again.
    assert (cache.hits, cache.misses) == (3, 43)


def test_another_session_reuses_nothing() -> None:
    wire = AnthropicWire()
    cache = BodyCache()
    nodes = list(enumerate([text("user", "q"), *_tool_turns(3)], start=1))
    wire.encode_body(_request([], nodes), cache=cache)
    # Same seqs, other messages: the per-node check re-encodes them, and no
    # wire message of the first session is reused.
    other = [
        (seq, text(m["role"] if m["role"] == "assistant" else "user", "x")) for seq, m in nodes
    ]
    request = _request([], [*other, (9, text("user", "more"))], session="s2")
    body = wire.encode_body(request, cache=cache)
    assert body == wire.encode_body(request)
    assert b'"ok"' not in body
