"""Sealed records read back exactly as the records they hold (issue 20 item 5).

A session seals the records of the packed events it appended into compressed
blocks (``log/_record_blocks.py``). Whatever reads the log -- ``session.events``
by index, slice, iteration or in reverse, ``event(seq)``, ``types()``, a fork,
the store's bytes -- must see what it saw before: these build the same session
twice, with blocks sealed every few bytes and never, and compare every read.
"""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any
from unittest.mock import patch

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from agent._harness import add, agent_on
from tapelog.emulator import Emulator
from tapelog.log import _record_blocks
from tapelog.log._api import Session
from tapelog.log._record_blocks import RecordBlock
from tapelog.store import JsonlStore

from ._builders import HEADER, assistant, ticking_clock, tool_result, user


@contextmanager
def _sealing_every(limit: int, checks: int = 1) -> Iterator[None]:
    """Records sealed once ``limit`` bytes are loose, counted every ``checks`` events."""
    with (
        patch.object(_record_blocks, "BLOCK_BYTES", limit),
        patch.object(_record_blocks, "CHECK_EVERY", checks),
    ):
        yield


@given(
    st.lists(st.binary(max_size=90), max_size=40),
    st.lists(st.integers(1, 5), min_size=40, max_size=40),
)
def test_a_block_gives_back_each_record_at_its_seq(records: list[bytes], gaps: list[int]) -> None:
    seqs, seq = [], 0
    for gap in gaps[: len(records)]:
        seq += gap
        seqs.append(seq)
    block = RecordBlock(seqs, records)
    other = RecordBlock([0], [b"x"])
    assert len(block) == len(records)
    for _ in range(2):  # decoded, then evicted by reads of other blocks and decoded again
        for s, record in zip(seqs, records, strict=True):
            assert block.record(s) == record
        for s in {s + 1 for s in seqs} - set(seqs):
            try:
                block.record(s)
            except KeyError:
                pass
            else:
                raise AssertionError(f"seq {s} is not in the block")
        for _ in range(_record_blocks.DECODED_KEPT):
            assert RecordBlock([1], [b"y"]).record(1) == b"y"
            assert other.record(0) == b"x"


# A turn: its steps, each the text chunks it streams and whether it calls a tool.
_STEPS = st.lists(
    st.tuples(st.lists(st.text(max_size=12), max_size=6), st.booleans()),
    min_size=1,
    max_size=3,
)
_TURNS = st.lists(_STEPS, min_size=1, max_size=5)


def _build(turns: list[list[tuple[list[str], bool]]]) -> Session:
    session = Session("s-blocks", created=1, clock=ticking_clock())
    session.append("request/header", {"header": HEADER, "reason": "initial"})
    for t, steps in enumerate(turns):
        session.append("turn/start", {"turn": t})
        session.append("user/message", user(f"turn {t}"), surface_op="append")
        for s, (texts, calls) in enumerate(steps):
            session.append("step/start", {"turn": t, "step": s})
            for text in texts:
                chunk = {"kind": "text", "text": text}
                session.append("assistant/chunk", {"turn": t, "step": s, "chunk": chunk})
            message = assistant("".join(texts), step=s, calls=int(calls)) | {"turn": t}
            session.append("assistant/message", message, surface_op="append")
            if calls:
                call = {"turn": t, "step": s, "call_id": "c0", "name": "read", "arguments": "{}"}
                session.append("tool/call", call)
                result = tool_result(turn=t, step=s)
                session.append("tool/result", result, surface_op="append")
            session.append("step/end", {"turn": t, "step": s})
        session.append("turn/end", {"turn": t, "reason": {"kind": "completed"}})
    return session


def _stored(session: Session) -> bytes:
    with TemporaryDirectory() as tmp:
        store = JsonlStore(Path(tmp))
        with store.create(session):
            pass
        return store.session_bytes(session.id)


def _reads(session: Session) -> dict[str, Any]:
    """Everything a reader of the log can ask, as comparable values."""
    events = session.events
    n = len(events)
    last_turn_end = max(i for i, t in enumerate(events.types()) if t == "turn/end")
    return {
        "lines": [e.encode() for e in events],
        "by_index": [events[i].encode() for i in range(-n, n)],
        "by_seq": [session.event(i).encode() for i in range(n)],
        "data": [(e.seq, e.time, e.type, e.data) for e in events],
        "slices": [[e.encode() for e in events[i : i + 7]] for i in range(0, n, 5)],
        "strided": [e.encode() for e in events[1::3]],
        "reversed": [e.encode() for e in reversed(events)],
        "types": list(events.types()),
        "types_from": list(events.types(n // 2)),
        "type_at": [events.type_at(i) for i in range(-n, n)],
        "messages": session.derive_messages(),
        "fork": [e.encode() for e in session.fork(last_turn_end).events],
        "stored": _stored(session),
    }


@settings(max_examples=40, deadline=None)
@given(_TURNS, st.integers(1, 300), st.integers(1, 9))
def test_a_session_with_sealed_records_reads_as_one_without(
    turns: list[list[tuple[list[str], bool]]], limit: int, checks: int
) -> None:
    with _sealing_every(10**9):
        loose = _build(turns)
    with _sealing_every(limit, checks):
        sealed = _build(turns)
        # later appends seal too, and every read still agrees
        sealed.append("turn/start", {"turn": len(turns)})
    loose.append("turn/start", {"turn": len(turns)})
    assume(any(isinstance(item, RecordBlock) for item in sealed.events._items))
    assert not any(isinstance(item, RecordBlock) for item in loose.events._items)
    assert sealed.events == loose.events
    assert _reads(sealed) == _reads(loose)
    for outside in (len(sealed), -len(sealed) - 1):
        for session in (sealed, loose):
            with pytest.raises(IndexError):
                session.events[outside]
            with pytest.raises(IndexError):
                session.event(outside)


async def test_the_loop_and_its_checker_run_on_sealed_records(tmp_path: Path) -> None:
    """Every record sealed as soon as it is appended: the loop's steps, the
    checker's shadow and the store read them back, and the log on disk is the
    session's own."""
    store = JsonlStore(tmp_path)
    calls = {"tool_calls": [{"name": "add", "arguments": '{"a": 1, "b": 2}'}]}
    emulator = Emulator(script=[calls, {"text": "three, " * 20}] * 4)
    with _sealing_every(1):
        async with agent_on(emulator, tools=[add], check=True) as agent:
            with store.create(agent.session) as writer:
                agent.writer = writer
                for n in range(4):
                    result = await agent.run(f"add, round {n}")
                    assert result.reason["kind"] == "completed"
    session = agent.session
    assert sum(isinstance(item, RecordBlock) for item in session.events._items) > 20
    assert store.session_bytes(session.id) == _stored(session)
    loaded = store.load(session.id).session
    assert [e.encode() for e in loaded.events] == [e.encode() for e in session.events]


def _held_per_chunk(chunks: int) -> float:
    """Bytes a session of ``chunks`` streamed chunks (distinct texts) holds per chunk."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        session = Session("s-held", created=1, clock=ticking_clock())
        session.append("turn/start", {"turn": 0})
        session.append("step/start", {"turn": 0, "step": 0})
        for i in range(chunks):
            text = f"{i * 7919 % 100_003:05d} piece of the answer number {i}"
            chunk = {"kind": "text", "text": text}
            session.append("assistant/chunk", {"turn": 0, "step": 0, "chunk": chunk})
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(session) == chunks + 2
    return held / chunks


def test_sealed_chunks_hold_a_fraction_of_their_records() -> None:
    """A chunk's record is ~90 bytes plus a bytes object's header: ~130 bytes
    held, one object per chunk. Sealed, the chunks of a long session cost
    their share of a compressed block and a list slot."""
    with _sealing_every(10**9):
        loose = _held_per_chunk(1_500)
    sealed = _held_per_chunk(1_500)
    assert loose > 110, loose
    assert sealed < loose / 3, (sealed, loose)
