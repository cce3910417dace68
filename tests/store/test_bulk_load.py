"""The bulk load gives what the line-by-line load gives, on intact and damaged logs (issue 20).

``load`` and ``verify`` first read a session file in bulk (``store/_jsonl_bulk.py``:
batches of lines decoded by one C call, proved canonical by one comparison,
replayed by ``log/_bulk.py``) and fall back to the line-by-line path, which
names the problem, whenever the fast path does not accept the file. The fast
path may only accept what the slow one accepts, into the same session. Here
logs written by a real writer (digests at every flush, a fork's seed, tool
calls, chunks, a trimmed result, a turn a crash left open) are damaged at random (an edited byte, a
spaced line, a duplicated key, a removed, repeated or swapped line, a torn
tail, a wrong seq), then, half the time, forged (seqs renumbered, digests
rewritten: only the other checks can tell) and read both ways: the same session (events, surface,
messages, header fold, structural state) or the same refusal, and the same
``verify`` report.
"""

from __future__ import annotations

import functools
import hashlib
import re
import tempfile
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from log._builders import HEADER, ticking_clock
from tapelog import Session
from tapelog.log import encode
from tapelog.store import JsonlStore
from tapelog.store._api import read_session_bytes, verify_jsonl
from tapelog.store._jsonl_bulk import BATCH_BYTES, load_jsonl_bulk


def _turn(session: Session, turn: int, steps: int, chunks: int) -> None:
    session.append("turn/start", {"turn": turn})
    text = [{"type": "text", "text": f"prompt {turn} \u00e9\u4e2d"}]
    session.append(
        "user/message", {"content": text, "source": {"kind": "user"}}, surface_op="append"
    )
    for step in range(steps):
        session.append("step/start", {"turn": turn, "step": step})
        for k in range(chunks):
            chunk = {"kind": "text" if k % 3 else "reasoning", "text": f"piece {k}"}
            session.append("assistant/chunk", {"turn": turn, "step": step, "chunk": chunk})
        cid = f"c{turn}.{step}"
        last = step == steps - 1
        content: list[dict[str, Any]] = [{"type": "text", "text": "done" if last else ""}]
        if not last:
            content = [{"type": "tool_call", "id": cid, "name": "read", "arguments": "{}"}]
        message = {
            "turn": turn,
            "step": step,
            "content": content,
            "source": {"provider": "openai", "model": "m"},
            "usage": {"input": 10, "output": 2},
        }
        session.append("assistant/message", message, surface_op="append")
        if not last:
            call = {"turn": turn, "step": step, "call_id": cid, "name": "read", "arguments": "{}"}
            asked = session.append("tool/call", call).seq
            result = {"turn": turn, "step": step, "call_id": cid, "content": "x" * 40}
            result["is_error"] = False
            sources = [asked] if step % 2 else None
            seq = session.append(
                "tool/result", result, surface_op="append", source_seqs=sources
            ).seq
            if turn % 2:  # trimmed: a replace of the result by a shorter one
                trimmed = {**result, "content": "[trimmed]"}
                op = {"op": "replace", "start": seq, "end": seq}
                session.append("tool/result", trimmed, surface_op=op)
        session.append("step/end", {"turn": turn, "step": step})
    session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


def _crashed(session: Session, turn: int) -> None:
    """A turn left open by a crash after its step's tool call was logged."""
    session.append("turn/start", {"turn": turn})
    text = [{"type": "text", "text": "and then?"}]
    session.append(
        "user/message", {"content": text, "source": {"kind": "user"}}, surface_op="append"
    )
    session.append("step/start", {"turn": turn, "step": 0})
    call = {"turn": turn, "step": 0, "call_id": "open", "name": "read", "arguments": "{}"}
    asks = [{"type": "tool_call", "id": "open", "name": "read", "arguments": "{}"}]
    source = {"provider": "openai", "model": "m"}
    message = {"turn": turn, "step": 0, "content": asks, "source": source}
    session.append("assistant/message", message, surface_op="append")
    session.append("tool/call", call)


@functools.cache
def _log(turns: int, chunks: int, fork: bool) -> bytes:
    """A session file as a writer leaves it (a digest at every flush)."""
    with tempfile.TemporaryDirectory() as tmp:
        store = JsonlStore(Path(tmp))
        session = Session("bulk-p", clock=ticking_clock())
        with store.create(session) as writer:
            session.append("request/header", {"header": HEADER, "reason": "initial"})
            for turn in range(turns):
                _turn(session, turn, 2 + turn % 2, chunks)
                writer.flush()
            if chunks % 2:  # a crash mid-step: a tool call logged, no result
                _crashed(session, turns)
                writer.flush()
        if not fork:
            return store.path(session.id).read_bytes()
        at = next(e.seq for e in session.events if e.type == "turn/end")
        child = session.fork(at, id="bulk-p")  # the id verify expects
        with JsonlStore(Path(tmp) / "forks").create(child) as writer:
            _turn(child, turns, 2, chunks)
            writer.flush()
        return (Path(tmp) / "forks" / "bulk-p.jsonl").read_bytes()


def _damage(data: bytes, kind: str, where: int, what: int) -> bytes:
    lines = data.split(b"\n")[:-1]
    i = 1 + where % max(1, len(lines) - 1) if len(lines) > 1 else 0
    line = lines[i]
    if kind == "byte":
        j = what % len(line)
        lines[i] = line[:j] + bytes([b'0x" {\\,1'[what % 8]]) + line[j + 1 :]
    elif kind == "spaced":
        lines[i] = line.replace(b'":', b'": ', 1 + what % 2)
    elif kind == "duplicate_key":
        lines[i] = line.replace(b"{", b'{"seq":0,', 1)
    elif kind == "remove":
        del lines[i]
    elif kind == "repeat":
        lines.insert(i, line)
    elif kind == "swap" and i + 1 < len(lines):
        lines[i], lines[i + 1] = lines[i + 1], lines[i]
    elif kind == "step":  # an event moved into another step (or out of any)
        lines[i] = line.replace(b'"step":', b'"step":9', 1)
    elif kind == "sources":  # a result said to come from a later event
        sourced = [k for k, x in enumerate(lines) if b'"source_seqs"' in x] or [i]
        k = sourced[where % len(sourced)]
        lines[k] = re.sub(rb'"source_seqs":\[\d+', b'"source_seqs":[%d' % what, lines[k])
    elif kind == "float":  # equal to the number, but not an integer
        lines[i] = re.sub(rb'"(turn|step)":(\d+)', rb'"\1":\2.0', line, count=1)
    elif kind == "seq":
        lines[i] = line.replace(b'"seq":', b'"seq":1', 1)
    out = b"\n".join(lines) + b"\n"
    if kind == "torn":
        out = out[: -1 - what % 20]
    return out


def _forged(data: bytes) -> bytes:
    """``data`` as a forger leaves it after an edit: seqs renumbered in order
    and every digest rewritten over the bytes before it, so that only the
    other checks can tell."""
    lines = data.split(b"\n")
    out: list[bytes] = [lines[0]]
    size = len(lines[0]) + 1
    for seq, line in enumerate(lines[1:-1]):
        line = re.sub(rb'^\{"seq":\d+', b'{"seq":%d' % seq, line)
        if b'"type":"log/digest"' in line:
            sha = hashlib.sha256(b"\n".join(out) + b"\n").hexdigest()
            digest = {"bytes": size, "sha256": sha}
            line = re.sub(rb'"data":\{[^}]*\}', b'"data":' + encode(digest), line)
        out.append(line)
        size += len(line) + 1
    return b"\n".join([*out, lines[-1]])


def _loaded(data: bytes) -> Any:
    """What ``load`` makes of ``data``: the session's whole state, or the refusal."""
    try:
        loaded, good = read_session_bytes(data, source="f")
    except Exception as exc:
        return (type(exc).__name__, str(exc))
    s = loaded.session
    rules = s.rules
    return (
        [e.encode() for e in s.events],
        [type(i).__name__ for i in s._fold.items],
        s.surface,
        s.replace_generation,
        s.derive_nodes(),
        s.header,
        s.info,
        (rules.open_turn, sorted(rules.handed_over()), rules.ledger.open_calls()),
        (loaded.warnings, loaded.digest, loaded.undigested, loaded.torn, good),
    )


def _verified(data: bytes) -> Any:
    report = verify_jsonl(data, expected_id="bulk-p")
    return (
        [str(p) for p in report.problems],
        report.warnings,
        report.notes,
        report.digest,
        report.stats,
        report.ok,
    )


def _line_by_line() -> Any:
    """Both readers with the bulk path turned off."""
    off = mock.patch("tapelog.store._jsonl_read.load_jsonl_bulk", return_value=None)
    return off, mock.patch("tapelog.store._verify.load_jsonl_bulk", return_value=None)


KINDS = (
    "none",
    "byte",
    "spaced",
    "duplicate_key",
    "remove",
    "repeat",
    "swap",
    "step",
    "float",
    "sources",
    "seq",
    "torn",
)


@settings(max_examples=200, deadline=None)
@given(
    turns=st.integers(1, 4),
    chunks=st.integers(0, 5),
    fork=st.booleans(),
    kind=st.sampled_from(KINDS),
    where=st.integers(0, 10_000),
    what=st.integers(0, 10_000),
    forge=st.booleans(),
)
def test_bulk_and_line_by_line_agree(
    turns: int, chunks: int, fork: bool, kind: str, where: int, what: int, forge: bool
) -> None:
    pristine = _log(turns, chunks, fork)
    assert load_jsonl_bulk(pristine) is not None  # an intact log takes the fast path
    data = pristine if kind == "none" else _damage(pristine, kind, where, what)
    if forge:
        data = _forged(data)
    fast = (_loaded(data), _verified(data))
    load_off, verify_off = _line_by_line()
    with load_off, verify_off:
        slow = (_loaded(data), _verified(data))
    assert fast == slow


def test_a_log_longer_than_a_batch_loads_as_line_by_line() -> None:
    """Batches join seamlessly: digests and chunk runs across a batch's end."""
    data = _log(12, 30, False)
    assert len(data) > 2 * BATCH_BYTES
    assert load_jsonl_bulk(data) is not None
    load_off, verify_off = _line_by_line()
    with load_off, verify_off:
        slow = (_loaded(data), _verified(data))
    assert (_loaded(data), _verified(data)) == slow


@pytest.mark.parametrize("size", [1, 300, 4096])
def test_any_batch_size_loads_as_line_by_line(size: int) -> None:
    """Batches of one line (every line longer than a batch), of a few, of many:
    a digest first or last in its batch is checked against the right bytes."""
    data = _log(3, 4, True)
    load_off, verify_off = _line_by_line()
    with load_off, verify_off:
        slow = (_loaded(data), _verified(data))
    with mock.patch("tapelog.store._jsonl_bulk.BATCH_BYTES", size):
        assert load_jsonl_bulk(data) is not None
        assert (_loaded(data), _verified(data)) == slow
