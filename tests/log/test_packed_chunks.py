"""Small events (chunks above all) are kept as their log line, and behave as events in every way.

Chunks are most of a log's events; a session keeps each as its canonical bytes
(:class:`tapelog.log.PackedChunk`) and decodes ``data`` on access.
"""

from __future__ import annotations

import gc
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tapelog import CorruptLogError
from tapelog.log import decode, encode
from tapelog.log._api import Event, Session, chunk_kind, event_from_json
from tapelog.log._events import PackedChunk, PackedEvent
from tapelog.store import JsonlStore
from tapelog.store._api import verify_jsonl
from tapelog.store._format import header_line

CHUNK = {"turn": 1, "step": 1, "chunk": {"kind": "text", "text": "héllo, world"}}


def _chunk_session(n: int = 3) -> Session:
    session = Session("s1", created=1, clock=lambda: 5)
    session.append("turn/start", {"turn": 1})
    for i in range(n):
        session.append("assistant/chunk", {**CHUNK, "chunk": {"kind": "text", "text": f"p{i}"}})
    return session


def test_an_appended_chunk_is_packed_and_reads_back_as_logged() -> None:
    session = Session()
    event = session.append("assistant/chunk", CHUNK)
    assert type(event) is PackedChunk
    read = session.events[0]  # made from the fold's record on each read
    assert type(read) is PackedChunk
    assert read == event
    assert read.encode() == event.encode()
    assert read.time == event.time
    assert chunk_kind(read) == "text"
    assert event.data == CHUNK
    assert event.type == "assistant/chunk"
    assert chunk_kind(event) == "text"
    plain = Event(seq=0, time=event.time, type="assistant/chunk", data=event.data)
    assert event.encode() == plain.encode()
    assert event == plain
    assert plain == event
    assert hash(event) == hash(plain)
    with pytest.raises(AttributeError):
        event.data = {}  # type: ignore[misc]


@given(
    text=st.text(max_size=40),
    index=st.one_of(st.none(), st.integers(0, 5)),
    extra=st.dictionaries(st.sampled_from(["raw", "id"]), st.text(max_size=5), max_size=2),
)
def test_packing_is_lossless(text: str, index: int | None, extra: dict[str, Any]) -> None:
    chunk: dict[str, Any] = {"kind": "text", "text": text, **extra}
    if index is not None:
        chunk["index"] = index
    try:
        session = Session(clock=lambda: 7)
        event = session.append("assistant/chunk", {"turn": 2, "step": 3, "chunk": chunk})
    except Exception:  # lone surrogates are refused like any other event
        return
    assert event.data == {"turn": 2, "step": 3, "chunk": chunk}
    again = event_from_json(decode(event.encode()), decoded=True, line=event.encode())
    assert again == event
    assert again.encode() == event.encode()


def test_replayed_and_loaded_chunks_are_packed(tmp_path: Path) -> None:
    session = _chunk_session()
    plain = [Event(seq=e.seq, time=e.time, type=e.type, data=e.data) for e in session.events]
    replayed = Session.from_events(plain)
    assert all(type(e) is PackedEvent for e in replayed.events)  # turn/start is packed too
    assert replayed.events == session.events
    store = JsonlStore(tmp_path)
    with store.create(session):
        pass
    loaded = store.load("s1").session
    assert all(type(e) is PackedChunk for e in loaded.events if e.type == "assistant/chunk")
    assert list(loaded.events) == list(session.events)
    assert [e.encode() for e in loaded.events] == [e.encode() for e in session.events]


def _write(tmp_path: Path, lines: list[bytes]) -> Path:
    from tapelog.log._api import SessionInfo

    path = tmp_path / "s1.jsonl"
    path.write_bytes(
        header_line(SessionInfo(id="s1", created=1)) + b"\n" + b"\n".join(lines) + b"\n"
    )
    return path


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            b'{"seq":0,"time":1,"type":"assistant/chunk","data":{"turn":"1","step":1,"chunk":{"kind":"text"}}}',
            "data.turn must be an integer",
        ),
        (
            b'{"seq":0,"time":1,"type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":{}}}',
            "chunk.kind must be a string",
        ),
        (
            b'{"seq":0,"time":1,"type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":{"kind":"text"}},"surface_op":"append"}',
            "not a surface event",
        ),
    ],
)
def test_a_bad_chunk_line_is_refused_on_load_naming_its_line(
    tmp_path: Path, line: bytes, message: str
) -> None:
    _write(tmp_path, [line])
    with pytest.raises(CorruptLogError, match=rf"line 2.*{message}"):
        JsonlStore(tmp_path).load("s1")


def test_a_chunk_line_with_extra_spaces_loads_as_its_canonical_bytes(tmp_path: Path) -> None:
    spaced = (
        b'{"seq": 0, "time": 1, "type": "assistant/chunk", '
        b'"data": {"turn": 1, "step": 1, "chunk": {"kind": "text", "text": "a b"}}}'
    )
    path = _write(tmp_path, [spaced])
    (event,) = JsonlStore(tmp_path).load("s1").session.events
    assert type(event) is PackedChunk
    assert event.encode() == encode(decode(spaced))
    report = verify_jsonl(path.read_bytes(), expected_id="s1")
    assert report.ok
    assert any("whitespace" in w for w in report.warnings)


def _bytes_held(make: Any) -> int:
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    kept = make()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del kept
    return after - before


def test_a_packed_chunk_holds_far_less_memory_than_the_decoded_event() -> None:
    session = _chunk_session(200)
    lines = [e.encode() for e in session.events]

    def packed_session() -> Any:
        return Session.from_events(
            event_from_json(decode(x), decoded=True, line=x) for x in lines
        ).events

    def plain_events() -> Any:
        return [event_from_json(decode(x), decoded=True) for x in lines]

    packed, plain = _bytes_held(packed_session), _bytes_held(plain_events)
    assert packed < plain / 2, (packed, plain)


def test_a_packed_event_keeps_its_payload_bytes_not_its_line() -> None:
    """The envelope text (``{"seq":..,"time":..,"type":"..","data":``, ~45 bytes
    here) is the same canonical text for every packed event: it is rebuilt from
    the fields by ``encode()``, not held once per event (issue 20: memory per
    message). Measured as a load holds it: from the file's bytes."""
    session = _chunk_session(400)
    lines = [e.encode() for e in session.events]
    data = b"\n".join(lines)

    def loaded() -> Any:
        return Session.from_events(
            event_from_json(decode(x), decoded=True, line=x) for x in data.split(b"\n")
        ).events

    held = _bytes_held(loaded)
    line_bytes = sum(sys.getsizeof(line) for line in lines)
    event_object = sys.getsizeof(session.events[1]) + 16  # with its GC header
    # Less than each line plus its event object: the envelope text is not kept.
    assert held < line_bytes + event_object * len(lines) - 40 * len(lines), held / len(lines)
    assert [e.encode() for e in session.events] == lines
