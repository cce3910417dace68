"""A body travels as parts: the parts are the body, in order, however they are cut.

:class:`WireBody` is what the loop hands the edge (never joined on the way);
:class:`ByteRun` is how a wire's piece cache keeps a history that only grows,
as immutable parts the next step reuses.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent._harness import SECRET, WIRES, assert_bytes_rebuild
from tapelog.agent import Agent, RetryPolicy, tool
from tapelog.emulator import Emulator
from tapelog.llm import make_client
from tapelog.llm._api import AnthropicWire, BodyCache, OpenAIWire, ResponsesWire, WireBody
from tapelog.llm._pieces import CHUNK_BYTES, SEGMENT_BYTES, SEGMENT_PARTS, ByteRun
from tapelog.log._api import EpochHeader, LlmCallConfig, Session
from tapelog.request import build_request

# Parts around the chunk size, and many small ones: both groupings are exercised.
_PART = st.one_of(
    st.binary(max_size=40),
    st.integers(min_value=0, max_value=3 * 1024).map(lambda n: b"x" * n),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_PART, max_size=60), st.integers(min_value=1, max_value=2048))
def test_a_body_is_its_parts_joined_whatever_the_chunk_size(parts: list[bytes], size: int) -> None:
    body = WireBody(parts)
    whole = b"".join(parts)
    assert bytes(body) == whole
    assert len(body) == len(whole)
    assert bytes(body) is bytes(body)  # joined once, for the callers that need one object
    # Twice: a retry resends the same bytes from the same body.
    for _ in range(2):
        chunks = list(body.chunks(size))
        assert b"".join(chunks) == whole
        assert all(chunks), "no empty chunk goes to the socket"
        for chunk in chunks:
            # A group of small parts stops once it reaches the size; a large part goes alone.
            assert len(chunk) < 2 * size or chunk in parts


def test_a_body_keeps_no_mutable_part() -> None:
    source = bytearray(b'{"a":1}')
    body = WireBody([b"", source])
    source[1:4] = b'"b"'
    assert bytes(body) == b'{"a":1}'
    assert all(type(part) is bytes for part in body.parts)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.lists(
            st.one_of(
                st.binary(min_size=1, max_size=30),
                st.integers(min_value=1, max_value=SEGMENT_BYTES + 10).map(lambda n: b"y" * n),
            ),
            max_size=8,
        ),
        max_size=40,
    )
)
def test_a_run_is_its_items_with_commas_and_a_snapshot_never_changes(
    steps: list[list[bytes]],
) -> None:
    run = ByteRun()
    added: list[bytes] = []
    snapshots: list[tuple[list[bytes], bytes]] = []
    for items in steps:
        for item in items:
            run.add(item)
            added.append(item)
        parts = run.parts()
        assert bool(run) == bool(added)
        assert b"".join(parts) == b",".join(added)
        assert all(type(part) is bytes for part in parts)
        snapshots.append((parts, b",".join(added)))
    for parts, joined in snapshots:  # later appends left earlier snapshots alone
        assert b"".join(parts) == joined


def test_a_long_run_is_a_few_large_parts_and_old_ones_are_the_same_objects() -> None:
    run = ByteRun()
    item = b'{"role":"user","content":"' + b"z" * 500 + b'"}'
    for _ in range(2_000):
        run.add(item)
    before = run.parts()
    run.add(item)
    after = run.parts()
    total = 2_001 * len(item) + 2_000
    assert b"".join(after) == b",".join([item] * 2_001)
    # Sealed segments: what the next step reuses by identity (the checker relies on it).
    assert len(after) <= total // SEGMENT_BYTES + 2 + 2 * SEGMENT_PARTS
    sealed = [p for p in before if len(p) > 2 * len(item)]
    assert len(sealed) >= 10
    assert all(a is b for a, b in zip(sealed, after, strict=False))


# --- on the wire: real TCP to the emulator --------------------------------------

_LOOPBACK: dict[str, tuple[str, str, str, dict[str, Any]]] = {
    # wire: provider, model, path on the emulator, config options
    "chat": ("deepseek", "deepseek-chat", "/deepseek", {}),
    "anthropic": ("anthropic", "claude-sonnet-4-5", "/anthropic", {}),
    "responses": ("openai", "gpt-4.1-mini", "/openai/v1", {"wire": {"api": "responses"}}),
}


@tool
def long_note(n: int) -> str:
    """A long note.

    Args:
        n: Which note.
    """
    return f"note {n}: " + "0123456789" * 4_000


@pytest.mark.parametrize("wire", sorted(_LOOPBACK))
async def test_a_body_sent_as_parts_arrives_sized_byte_for_byte_on_one_connection(
    wire: str, loopback_emulator: tuple[Emulator, int]
) -> None:
    """Over real TCP: a body of several chunks goes out with its Content-Length
    (no chunked framing), arrives as the bytes the log rebuilds, a retry
    resends the same bytes, and the session keeps one kept-alive connection."""
    emulator, port = loopback_emulator
    calls = [{"tool_calls": [{"name": "long_note", "arguments": f'{{"n": {n}}}'}]} for n in (1, 2)]
    emulator.push(*calls, {"error": {"status": 503, "message": "busy"}}, {"text": "done"})
    provider, model, path, options = _LOOPBACK[wire]
    config = LlmCallConfig(provider=provider, model=model, **options)
    transport = httpx.AsyncHTTPTransport()
    async with httpx.AsyncClient(transport=transport, timeout=30) as http:
        client = make_client(
            config,
            base_url=f"http://127.0.0.1:{port}{path}",
            http_client=http,
            env={WIRES[provider][2]: SECRET},
        )
        agent = Agent(
            Session(), client, config=config, tools=[long_note], retry=RetryPolicy(base_delay=0)
        )
        result = await agent.run("read two notes")
        assert result.ok, result.reason
        assert len(transport._pool.connections) == 1
    received = emulator.received
    assert len(received) == 4
    assert len(received[-1].body) > CHUNK_BYTES  # sent as more than one chunk
    assert received[2].body == received[3].body  # the retry: the same bytes
    for r in received:
        assert r.headers["content-length"] == str(len(r.body))
        assert "transfer-encoding" not in r.headers
    assert_bytes_rebuild(agent.session, emulator)


# --- the history view: a cache matches by it, and is exact across replaces ------

_OPS = st.lists(
    st.tuples(st.sampled_from(["append", "append", "replace"]), st.integers(0, 50), st.text()),
    min_size=1,
    max_size=25,
)


@settings(max_examples=40, deadline=None)
@given(ops=_OPS, prefix=st.booleans())
def test_cached_bodies_of_a_growing_and_replaced_history_are_the_straight_ones(
    ops: list[tuple[str, int, str]], prefix: bool
) -> None:
    """Requests built from a session's history view (``LlmRequest.history``) as
    it grows and as nodes are replaced: every wire's cached body is its straight
    encoding, so matching by the view is exact, and a replace is seen."""
    session = Session()
    header = EpochHeader(
        config=LlmCallConfig(provider="openai", model="m1"),
        system="Be brief.",
        prefix=[{"role": "user", "content": [{"type": "text", "text": "ctx"}]}] if prefix else (),
    )
    wires: list[Any] = [OpenAIWire(dialect="deepseek"), AnthropicWire(), ResponsesWire()]
    caches = [BodyCache() for _ in wires]
    for op, at, text in ops:
        content = [{"type": "text", "text": text}]
        nodes = [seq for seq, _ in session.history()]
        if op == "replace" and nodes:
            seq = nodes[at % len(nodes)]
            surface_op: Any = {"op": "replace", "start": seq, "end": seq}
        else:
            surface_op = "append"
        data = {"content": content, "source": {"kind": "user"}}
        session.append("user/message", data, surface_op=surface_op)
        request = build_request(
            header=header, nodes=session.history(), session_id=session.id, boundary_seq=None
        )
        assert request.history is not None
        assert replace(request).history is None  # only build_request's own requests carry one
        for wire, cache in zip(wires, caches, strict=True):
            assert wire.encode_body(request, cache=cache) == wire.encode_body(request)


def test_a_run_adopts_equal_parts_and_keeps_its_bytes() -> None:
    """What the checker's shadow does once it found parts equal: hold the sent
    objects instead of its own, the newest sealed segments and the open parts."""
    run = ByteRun()
    item = b'{"n":"' + b"q" * 700 + b'"}'
    for _ in range(300):
        run.add(item)
    before = run.parts()
    copies = {id(p): bytes(bytearray(p)) for p in before}
    run.adopt(copies)
    after = run.parts()
    assert b"".join(after) == b"".join(before)
    assert all(a is copies[id(b)] for a, b in zip(after, before, strict=True))
    for _ in range(300):  # new segments: only they (and the open parts) are named next
        run.add(item)
    grown = run.parts()
    fresh = {id(p): bytes(bytearray(p)) for p in grown if not any(p is q for q in after)}
    run.adopt(fresh)
    assert b"".join(run.parts()) == b",".join([item] * 600)
    old = [p for p in after if len(p) > 2 * len(item)]  # sealed before: adopted then
    now = run.parts()
    assert all(p is q for p, q in zip(now, old, strict=False))
    assert all(any(p is v for v in fresh.values()) for p in now[len(old) :])
