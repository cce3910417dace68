"""What the per-node piece cache keeps: the bytes of a straight encode, in exact-size buffers.

A cached piece lives as long as its history message, so its allocation is
paid once per message of every session. ``orjson.dumps`` hands back bytes in
a buffer sized for the worst case (4 KB for a 70-byte message with orjson
3.13) and ``sys.getsizeof`` does not show it: only the allocator does, so
these tests ask ``tracemalloc``.
"""

from __future__ import annotations

import sys
import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest

from tapelog.llm import LlmRequest
from tapelog.llm._api import AnthropicWire, BodyCache, OpenAIWire
from tapelog.llm._pieces import exact_size
from tapelog.log import encode

from ._requests import TOOL_LOOP, call, make_request, text, tool_result

WIRES = [OpenAIWire(dialect="openai"), OpenAIWire(dialect="deepseek"), AnthropicWire()]

# A history with every kind of piece: plain and unicode text, reasoning, tool
# calls, a tool error, an image, and a result long enough that orjson grows
# its buffer past the first 4 KB.
HISTORY: list[dict[str, Any]] = [
    *TOOL_LOOP,
    text("user", "Grüße, 世界 — and an emoji 🙂"),
    {"role": "assistant", "content": [call("c2", '{"key": "k12"}'), call("c3", "{}")]},
    tool_result("c2", "k12: " + "x" * 80),
    tool_result("c3", "no such key", is_error=True),
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "And this?"},
            {"type": "image", "media_type": "image/png", "data": "iVBORw0KGgo="},
        ],
    },
    {"role": "assistant", "content": [{"type": "text", "text": "A long answer. " * 400}]},
]


def _request(wire: OpenAIWire | AnthropicWire, history: list[dict[str, Any]]) -> LlmRequest:
    provider = "anthropic" if isinstance(wire, AnthropicWire) else "deepseek"
    # No session id: nothing is reused across requests, so every node's piece
    # goes through the per-node cache (what these tests look at).
    return make_request(history, provider=provider, model="m1")


def _never() -> Any:
    raise AssertionError("the piece should have come from the cache")


def _straight_piece(wire: OpenAIWire | AnthropicWire, message: Any, model: str) -> Any:
    """The piece of one message, encoded on its own with no cache."""
    if isinstance(wire, AnthropicWire):
        return wire.message_blocks(message)
    return encode(wire.message(message, model=model))


def _bytes_in(piece: Any) -> Iterator[bytes]:
    if type(piece) is bytes:
        yield piece
    elif type(piece) is tuple:
        for item in piece:
            yield from _bytes_in(item)


@pytest.mark.parametrize("wire", WIRES, ids=repr)
def test_cached_pieces_are_the_bytes_of_a_straight_encode(
    wire: OpenAIWire | AnthropicWire,
) -> None:
    request = _request(wire, HISTORY)
    cache = BodyCache()
    assert wire.encode_body(request, cache=cache) == wire.encode_body(request)
    for seq, message in zip(request.node_seqs, request.messages, strict=True):
        cached = cache.piece(seq, message, _never)
        straight = _straight_piece(wire, message, request.config.model)
        assert cached == straight
        assert list(_bytes_in(cached)) == list(_bytes_in(straight))
        if isinstance(wire, AnthropicWire):  # each block's bytes are its object's encoding
            assert all(raw == encode(block) for block, raw in cached[1])


def test_exact_size_keeps_the_value_and_copies_only_bytes() -> None:
    raw = orjson.dumps({"role": "user", "content": "hi"})
    frozen_block = make_request([text("user", "x")]).messages[0]
    value = ("user", ((frozen_block, raw), (frozen_block, raw)))
    copied = exact_size(value)
    assert copied == value
    assert copied[1][0][0] is frozen_block  # objects other than bytes are kept as they are
    assert copied[1][0][1] is not raw
    assert exact_size("text") == "text"
    assert exact_size(b"") == b""


def _traced(make: Callable[[], Any]) -> tuple[Any, int]:
    """``make()`` and the bytes it left allocated (what it returned holds)."""
    tracing = tracemalloc.is_tracing()  # e.g. python -X tracemalloc: leave it on
    if not tracing:
        tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        value = make()
        return value, tracemalloc.get_traced_memory()[0] - before
    finally:
        if not tracing:
            tracemalloc.stop()


@pytest.mark.parametrize("length", [1, 70, 500, 5000, 100_000])
def test_an_exact_size_copy_allocates_only_its_length(length: int) -> None:
    raw = orjson.dumps({"t": "x" * length})
    copy, allocated = _traced(lambda: exact_size(raw))
    assert copy == raw
    # getsizeof is the bytes header plus the length: the copy holds no slack
    # (a few bytes of leeway for the interpreter's own bookkeeping while tracing;
    # orjson's own result holds 4 KB or more).
    assert sys.getsizeof(copy) <= allocated <= sys.getsizeof(copy) + 64


def _growing_history(n: int) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = []
    for i in range(n // 3):
        history.append(text("user", f"Question {i}: what does note k{i} say?"))
        history.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Let me look note {i} up."},
                    call(f"call_{i}", f'{{"key": "k{i}"}}'),
                ],
            }
        )
        history.append(tool_result(f"call_{i}", f"k{i}: " + "note text " * 8))
    return history


@pytest.mark.parametrize("wire", WIRES, ids=repr)
def test_the_cache_holds_each_piece_in_an_exact_size_buffer(
    wire: OpenAIWire | AnthropicWire,
) -> None:
    """What filling the cache leaves allocated is the pieces' own sizes plus a
    small per-node overhead; an over-allocated piece costs 4 KB more."""
    nodes = 300
    request = _request(wire, _growing_history(nodes))  # frozen before measuring
    cache = BodyCache()
    body, allocated = _traced(lambda: wire.encode_body(request, cache=cache))
    pieces = [
        cache.piece(seq, m, _never)
        for seq, m in zip(request.node_seqs, request.messages, strict=True)
    ]
    exact = sum(sys.getsizeof(b) for piece in pieces for b in _bytes_in(piece))
    overhead = (allocated - sys.getsizeof(body) - exact) / nodes
    # Entry tuple, dict slot, the remembered parts and keys, and (Anthropic)
    # the frozen wire blocks and the kept wire messages: under 1 KB (about
    # 80 bytes on the OpenAI wire, 750 on Anthropic's); one piece holding
    # orjson's buffer adds 4 KB.
    assert overhead < 2048, overhead
