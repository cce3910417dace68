"""JsonlStore: the conformance suite plus what is specific to files."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tapelog import CorruptLogError, Session, SessionLockedError, StoreError
from tapelog.log import encode
from tapelog.store import JsonlStore, SessionStore
from tapelog.store._api import read_session_file
from tapelog.store._format import header_line

from .conformance import StoreConformance, full_session, lines_of, one_turn


class TestJsonlStore(StoreConformance):
    def make_store(self, tmp_path: Path) -> SessionStore:
        return JsonlStore(tmp_path / "sessions")

    def write_raw(self, store: SessionStore, session_id: str, lines: list[bytes]) -> None:
        assert isinstance(store, JsonlStore)
        store.root.mkdir(parents=True, exist_ok=True)
        store.path(session_id).write_bytes(b"".join(line + b"\n" for line in lines))


@pytest.fixture
def store(tmp_path: Path) -> JsonlStore:
    return JsonlStore(tmp_path / "sessions")


def stored(store: JsonlStore, session: Session) -> Path:
    with store.create(session):
        pass
    return store.path(session.id)


def test_file_is_header_then_exact_event_bytes(store: JsonlStore) -> None:
    session = full_session("exact")
    path = stored(store, session)
    expected = [header_line(session.info), *lines_of(session)]
    assert path.read_bytes() == b"".join(line + b"\n" for line in expected)
    assert path.read_bytes().splitlines()[0] == (
        b'{"format_version":0,"id":"exact","created":%d,"cwd":"/work/project"}'
        % session.info.created
    )


def test_nothing_is_created_until_a_session_is(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "not-yet")
    assert store.list() == []
    assert not (tmp_path / "not-yet").exists()


def test_torn_tail_is_dropped_with_a_warning_and_never_rewritten_on_load(
    store: JsonlStore,
) -> None:
    session = Session("torn")
    one_turn(session)
    path = stored(store, session)
    with path.open("ab") as f:
        f.write(b'{"seq":3,"time":17,"type":"turn/st')
    before = path.read_bytes()
    loaded = store.load("torn")
    assert lines_of(loaded.session) == lines_of(session)
    (warning,) = loaded.warnings
    assert "line 5: dropped an incomplete final line (34 bytes, no newline)" in warning
    assert "the 3 complete events before it are intact" in warning
    assert path.read_bytes() == before
    assert [s.events for s in store.list()] == [3]


def test_a_parseable_final_line_without_newline_is_still_torn(store: JsonlStore) -> None:
    session = Session("nonl")
    one_turn(session)
    path = stored(store, session)
    path.write_bytes(path.read_bytes()[:-1])
    loaded = store.load("nonl")
    assert len(loaded.session) == 2
    assert "line 4: dropped an incomplete final line" in loaded.warnings[0]


def test_open_cuts_the_torn_tail_and_appends_after_it(store: JsonlStore) -> None:
    session = Session("cut")
    one_turn(session)
    path = stored(store, session)
    intact = path.read_bytes()
    with path.open("ab") as f:
        f.write(b"\x00\x00\x00")
    resumed, writer = store.open("cut")
    assert "dropped an incomplete final line (3 bytes" in writer.warnings[0]
    assert path.read_bytes() == intact
    with writer:
        one_turn(resumed, 1)
    assert store.load("cut").warnings == ()
    assert lines_of(store.load("cut").session) == lines_of(resumed)


def test_damaged_middle_line_names_its_line(store: JsonlStore) -> None:
    session = Session("dmg")
    one_turn(session)
    one_turn(session, 1)
    path = stored(store, session)
    lines = path.read_bytes().split(b"\n")
    lines[3] = lines[3][:20]  # seq 2, line 4
    path.write_bytes(b"\n".join(lines))
    before = path.read_bytes()
    with pytest.raises(CorruptLogError) as info:
        store.load("dmg")
    assert info.value.line == 4
    assert "line 4 (seq 2): not valid JSON" in str(info.value)
    assert str(path) in str(info.value)
    with pytest.raises(CorruptLogError, match=r"line 4 \(seq 2\): not valid JSON"):
        store.open("dmg")
    assert path.read_bytes() == before


def test_a_damaged_final_line_with_its_newline_is_corruption_not_a_torn_tail(
    store: JsonlStore,
) -> None:
    session = Session("endbad")
    one_turn(session)
    path = stored(store, session)
    with path.open("ab") as f:
        f.write(b"garbage\n")
    with pytest.raises(CorruptLogError, match=r"line 5 \(seq 3\): not valid JSON"):
        store.load("endbad")


def test_semantic_error_names_its_line_and_seq(store: JsonlStore) -> None:
    header = encode({"format_version": 0, "id": "sem", "created": 1})
    events = [
        encode({"seq": 0, "time": 1, "type": "turn/start", "data": {"turn": 0}}),
        encode(
            {
                "seq": 1,
                "time": 1,
                "type": "user/message",
                "data": {"content": [], "source": {"kind": "user"}},
                "surface_op": {"op": "replace", "start": 0, "end": 0},
            }
        ),
    ]
    store.root.mkdir(parents=True)
    store.path("sem").write_bytes(b"\n".join([header, *events]) + b"\n")
    with pytest.raises(CorruptLogError) as info:
        store.load("sem")
    assert info.value.line == 3
    assert "line 3: seq 1: replace start seq 0 is not on the current surface" in str(info.value)


def test_header_naming_another_session_is_refused(store: JsonlStore) -> None:
    path = stored(store, Session("real"))
    path.rename(store.path("alias"))
    with pytest.raises(CorruptLogError, match="line 1: the header names session 'real'"):
        store.load("alias")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "line 1: the file is empty"),
        (b'{"format_version":0,"id":"h"', "line 1: the header line is incomplete"),
        (b"[1]\n", "line 1: the header must be a JSON object"),
        (b'{"format_version":0,"id":"h","created":1,"x":2}\n', "unknown field 'x'"),
        (b'{"format_version":0,"id":"h","created":"now"}\n', "'created' must be an integer"),
        (b'{"format_version":"0","id":"h","created":1}\n', "stored in format version '0'"),
    ],
)
def test_bad_headers_are_refused(store: JsonlStore, content: bytes, message: str) -> None:
    store.root.mkdir(parents=True)
    store.path("h").write_bytes(content)
    with pytest.raises(StoreError, match="session h") as info:
        store.load("h")
    assert message in str(info.value)


def test_list_survives_a_damaged_file_and_reads_a_long_last_line(store: JsonlStore) -> None:
    big = Session("big", created=2)
    one_turn(big)
    big.append(
        "user/message",
        {"content": [{"type": "text", "text": "x" * 200_000}], "source": {"kind": "user"}},
        surface_op="append",
    )
    stored(store, big)
    store.root.joinpath("broken.jsonl").write_bytes(b"not json\n")
    by_id = {s.id: s for s in store.list()}
    assert by_id["big"].events == 4
    assert by_id["big"].last_time == big.events[-1].time
    assert by_id["broken"].events is None
    assert by_id["broken"].error is not None
    assert "run `tapelog verify broken`" in by_id["broken"].error


def test_read_session_file_reads_any_path(store: JsonlStore, tmp_path: Path) -> None:
    session = full_session("anywhere")
    path = stored(store, session)
    moved = tmp_path / "copy.jsonl"
    moved.write_bytes(path.read_bytes())
    assert lines_of(read_session_file(moved).session) == lines_of(session)


# --- processes ----------------------------------------------------------------

_HOLDER = textwrap.dedent(
    """
    import sys, time
    from tapelog import Session
    from tapelog.store import JsonlStore
    writer = JsonlStore(sys.argv[1]).create(Session("shared"))
    print("ready", flush=True)
    sys.stdin.readline()
    writer.close()
    """
)


def test_a_second_process_cannot_open_a_session_being_written(store: JsonlStore) -> None:
    with subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(store.root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as child:
        try:
            assert child.stdout is not None
            assert child.stdin is not None
            assert child.stdout.readline().strip() == "ready"
            with pytest.raises(SessionLockedError) as info:
                store.open("shared")
            assert str(info.value) == (
                f"session shared is open for writing by another process (pid {child.pid}); "
                "wait for it to finish or stop it, then try again"
            )
            child.stdin.write("done\n")
            child.stdin.flush()
            assert child.wait(timeout=20) == 0
        finally:
            if child.poll() is None:
                child.kill()
    _, writer = store.open("shared")  # released when the holder closed
    writer.close()


_APPENDER = textwrap.dedent(
    """
    import sys
    from tapelog import Session
    from tapelog.store import JsonlStore
    root, flushed = sys.argv[1], int(sys.argv[2])
    session = Session("crash")
    writer = JsonlStore(root).create(session)
    def turn(n):
        session.append("turn/start", {"turn": n})
        session.append("user/message", {"content": [{"type": "text", "text": "p" * 500}],
                                        "source": {"kind": "user"}}, surface_op="append")
        session.append("turn/end", {"turn": n, "reason": {"kind": "completed"}})
    for n in range(flushed // 3):
        turn(n)
    writer.flush()
    print("flushed", len(session), flush=True)
    n = flushed // 3
    while True:
        turn(n)
        n += 1
        writer.flush()
    """
)


def test_sigkill_mid_write_keeps_every_flushed_event(store: JsonlStore) -> None:
    flushed = 30
    path = store.path("crash")
    with subprocess.Popen(
        [sys.executable, "-c", _APPENDER, str(store.root), str(flushed)],
        stdout=subprocess.PIPE,
        text=True,
    ) as child:
        try:
            assert child.stdout is not None
            # the flushed events and the digest that closed their write
            assert child.stdout.readline().split() == ["flushed", str(flushed + 1)]
            deadline = time.monotonic() + 10
            while path.stat().st_size < 200_000 and time.monotonic() < deadline:
                time.sleep(0.01)
            os.kill(child.pid, signal.SIGKILL)
            child.wait(timeout=10)
        finally:
            if child.poll() is None:
                child.kill()
    assert child.returncode == -signal.SIGKILL
    # A kill between write() calls leaves whole lines; simulate the torn write a
    # power cut could leave, so both outcomes are exercised on the real file.
    intact = store.load("crash")
    assert len(intact.session) >= flushed
    with path.open("ab") as f:
        f.write(b'{"seq":999999,"time":1,"ty')
    loaded = store.load("crash")
    assert len(loaded.session) == len(intact.session)
    assert "dropped an incomplete final line" in loaded.warnings[-1]
    assert [e.seq for e in loaded.session.events] == list(range(len(loaded.session)))
    resumed, writer = store.open("crash")
    with writer:
        one_turn(resumed, 10_000)
    assert store.load("crash").warnings == ()


def test_a_follower_never_hands_out_a_torn_line_and_hands_out_the_line_that_completes_it(
    store: JsonlStore,
) -> None:
    session = Session("torn-follow", created=5)
    store.create(session).close()
    one_turn(session)
    path = store.path(session.id)
    lines = lines_of(session)
    with store.follow(session.id, 0) as follower:
        with open(path, "ab") as f:
            f.write(lines[0] + b"\n" + lines[1][:10])
        assert follower.poll() == [lines[0]]
        with open(path, "ab") as f:
            f.write(lines[1][10:] + b"\n")
        assert follower.poll() == [lines[1]]


def test_a_follower_refuses_a_file_rewritten_since_it_was_read(store: JsonlStore) -> None:
    session = Session("rewritten", created=5)
    with store.create(session) as writer:
        one_turn(session)
        writer.flush()
    path = store.path(session.id)
    follower = store.follow(session.id, len(session))
    copy = path.with_name("copy.tmp")
    copy.write_bytes(path.read_bytes())
    os.replace(copy, path)  # the same bytes, another file
    with pytest.raises(StoreError, match="rewritten or cut since it was read; load it again"):
        follower.poll()
    follower.close()
