"""How session files come into being, who may read them, and what failures say.

* Session and lock files are owner-only, and a link planted where a lock file
  goes is refused, never followed (issue 8, item 9).
* A session file appears whole or not at all: a kill while it is created
  leaves no file, and an empty file an older tapelog left is a session that
  never started, which ``run`` starts afresh (item 14).
* Messages name the real cause and the path: the loser of a create race, a
  failed write (kept for a retry, or lost with a closing writer), a full disk
  while creating (item 17).
"""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from tapelog import Session, SessionExistsError, SessionNotFoundError, StoreError
from tapelog.cli import cli
from tapelog.store import JsonlStore
from tapelog.store import _jsonl as jsonl_module
from tapelog.store import _lock as lock_module
from tapelog.store._api import verify_jsonl


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _turn(session: Session, turn: int) -> None:
    session.append("turn/start", {"turn": turn})
    session.append(
        "user/message",
        {"content": [{"type": "text", "text": "hi"}], "source": {"kind": "user"}},
        surface_op="append",
    )
    session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


# --- permissions and links (item 9) ------------------------------------------------


@pytest.mark.usefixtures("umask_022")
def test_session_and_lock_files_are_owner_only(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "store")
    with store.create(Session("private")):
        pass
    assert _mode(store.path("private")) == 0o600
    assert _mode(store.root / ".locks" / "private.lock") == 0o600
    assert _mode(store.root / ".locks") == 0o700
    assert _mode(store.root) == 0o700  # created by the store, so owner-only too


@pytest.mark.parametrize("action", ["create", "open"])
def test_a_link_planted_as_the_lock_file_is_refused_and_its_target_kept(
    tmp_path: Path, action: str
) -> None:
    store = JsonlStore(tmp_path / "store")
    if action == "open":
        with store.create(Session("s")):
            pass
    victim = tmp_path / "precious.txt"
    victim.write_bytes(b"do not truncate me\n")
    locks = store.root / ".locks"
    locks.mkdir(parents=True, exist_ok=True)
    (locks / "s.lock").unlink(missing_ok=True)
    (locks / "s.lock").symlink_to(victim)
    with pytest.raises(StoreError) as info:
        store.create(Session("s")) if action == "create" else store.open("s")
    assert str(info.value) == (
        f"the lock file of session s, {locks / 's.lock'}, is a symbolic link; tapelog never "
        "follows one there (it would overwrite the link's target): remove the link and try "
        "again"
    )
    assert victim.read_bytes() == b"do not truncate me\n"


def test_a_session_file_that_is_a_link_is_not_appended_through(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "store")
    with store.create(Session("real")):
        pass
    elsewhere = tmp_path / "elsewhere.jsonl"
    store.path("real").rename(elsewhere)
    store.path("real").symlink_to(elsewhere)
    before = elsewhere.read_bytes()
    with pytest.raises(StoreError, match="is a symbolic link; tapelog appends only to"):
        store.open("real")
    assert elsewhere.read_bytes() == before
    assert store.load("real").session.id == "real"  # reading through it is fine


# --- atomic create (item 14) -------------------------------------------------------

_KILLED_WHILE_CREATING = textwrap.dedent(
    """
    import os, signal, sys
    from tapelog import Session
    from tapelog.store import JsonlStore
    from tapelog.store import _jsonl

    def die(fd, data):  # the process is killed as it writes the header
        os.kill(os.getpid(), signal.SIGKILL)

    _jsonl.write_all = die
    JsonlStore(sys.argv[1]).create(Session("k"))
    """
)


def test_a_kill_while_creating_a_session_leaves_no_session_file(tmp_path: Path) -> None:
    root = tmp_path / "store"
    child = subprocess.run(
        [sys.executable, "-c", _KILLED_WHILE_CREATING, str(root)], check=False, timeout=60
    )
    assert child.returncode == -9
    store = JsonlStore(root)
    assert not store.path("k").exists()
    assert not store.exists("k")
    assert store.list() == []
    with store.create(Session("k")) as writer:  # the id is free; the debris is cleared
        _turn(writer.session, 1)
    assert sorted(p.name for p in root.iterdir()) == [".locks", "k.jsonl"]
    assert verify_jsonl(store.path("k").read_bytes(), expected_id="k").ok


def test_an_empty_file_an_older_tapelog_left_is_a_session_never_started(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    store.path("e").write_bytes(b"")
    assert not store.exists("e")
    with pytest.raises(SessionNotFoundError) as info:
        store.load("e")
    assert str(info.value) == (
        f"session e ({store.path('e')}): line 1: the file is empty: the session was never "
        "started (a process stopped between creating its file and writing the header); "
        "`tapelog run --session e ...` starts it afresh, replacing the file, or delete the file"
    )
    (listed,) = store.list()
    assert listed.error is not None
    assert "the session was never started" in listed.error
    ran = CliRunner().invoke(
        cli,
        ["run", "hello", "--session", "e", "--tools", "none", "--store", str(tmp_path)],
        obj={"debug": False},
    )
    assert ran.exit_code == 0, ran.output
    assert store.exists("e")
    assert verify_jsonl(store.path("e").read_bytes(), expected_id="e").ok


# --- messages (item 17) --------------------------------------------------------------


def test_a_session_created_just_before_the_lock_was_taken_is_reported_as_existing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = JsonlStore(tmp_path)
    acquire = lock_module.WriteLock.acquire

    def winner_first(path: Path, session_id: str) -> lock_module.WriteLock:
        # another process creates (and closes) the same id just before this one locks;
        # create looks for the session under the lock, so it sees it (while the other
        # holds the lock it is refused by it: tests/store/test_create_race.py)
        monkeypatch.setattr(lock_module.WriteLock, "acquire", acquire)
        with JsonlStore(tmp_path).create(Session(session_id)):
            pass
        return acquire(path, session_id)

    monkeypatch.setattr(lock_module.WriteLock, "acquire", staticmethod(winner_first))
    with pytest.raises(SessionExistsError) as info:
        store.create(Session("race"))
    assert str(info.value) == (
        f"session race already exists in the store at {tmp_path}; open it to append, "
        "or choose another id"
    )
    assert verify_jsonl(store.path("race").read_bytes(), expected_id="race").ok


def _disk_full(monkeypatch: pytest.MonkeyPatch, *, after: int) -> None:
    """Let ``after`` writes through, then fail every one as a full disk does."""
    write_all = jsonl_module.write_all
    calls = 0

    def full(fd: int, data: bytes) -> None:
        nonlocal calls
        calls += 1
        if calls > after:
            raise OSError(errno.ENOSPC, "No space left on device")
        write_all(fd, data)

    monkeypatch.setattr(jsonl_module, "write_all", full)


def test_a_failed_flush_says_what_was_stored_and_that_the_writer_keeps_the_events(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = JsonlStore(tmp_path)
    session = Session("full")
    writer = store.create(session)
    _turn(session, 1)
    writer.flush()
    _disk_full(monkeypatch, after=0)
    _turn(session, 2)
    path = store.path("full")
    with pytest.raises(StoreError) as info:
        writer.flush()
    assert str(info.value) == (
        f"could not write 4 events of session full to {path}: No space left on device; none "
        "of the 4 events was stored; the stored session still ends after seq 3, its last "
        "complete write. Free space on that file system, then flush again (the writer keeps "
        "them until then)"
    )
    assert writer.pending == 4
    with pytest.raises(StoreError) as closing:
        writer.close()
    assert str(closing.value) == (
        f"could not write 5 events of session full to {path}: No space left on device; none "
        "of the 5 events was stored, and the writer is closing, so they are lost; the stored "
        "session still ends after seq 3, its last complete write. Free space on that file "
        "system, then resume the session to continue from there"
    )
    assert len(store.load("full").session) == 4


def test_a_full_disk_while_creating_names_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = JsonlStore(tmp_path)
    _disk_full(monkeypatch, after=0)
    with pytest.raises(StoreError) as info:
        store.create(Session("nospace"))
    assert str(info.value) == (
        f"could not create session nospace at {store.path('nospace')}: No space left on "
        "device; nothing was stored. Free space on that file system, then try again"
    )
    assert not store.exists("nospace")
    assert [p.name for p in tmp_path.iterdir()] == [".locks"]


def test_run_on_a_full_disk_says_the_unwritten_events_are_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _disk_full(monkeypatch, after=1)  # the header is written, every flush fails
    ran = CliRunner().invoke(
        cli,
        ["run", "hello", "--session", "d", "--tools", "none", "--store", str(tmp_path)],
        obj={"debug": False},
    )
    assert ran.exit_code == 2, ran.output
    *notes, line = ran.stderr.splitlines()
    assert len(notes) == 2, notes
    assert notes[0].startswith("note: no provider configured")
    assert notes[1] == "note: no session d in the store: started it as a new session"
    path = tmp_path / "d.jsonl"
    assert line.startswith("error: could not write ")
    assert f"events of session d to {path}: No space left on device" in line
    assert "and the writer is closing, so they are lost" in line
    assert "flush again" not in line


def _fsync_fails_once(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Fail the first ``fsync`` of a writer's flush with EIO (a flaky disk), as
    ``os.fsync`` itself fails; the list it returns holds the failed fd."""
    fsync, write = os.fsync, jsonl_module.JsonlWriter._write
    failed: list[int] = []
    flushing: list[bool] = []

    def flaky(fd: int) -> None:
        if flushing and not failed:
            failed.append(fd)
            raise OSError(errno.EIO, "Input/output error")
        fsync(fd)

    def writing(self: jsonl_module.JsonlWriter, lines: list[bytes]) -> None:
        flushing.append(True)
        write(self, lines)

    monkeypatch.setattr(os, "fsync", flaky)
    monkeypatch.setattr(jsonl_module.JsonlWriter, "_write", writing)
    return failed


def test_a_failed_flush_that_a_later_flush_stored_says_so_when_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = JsonlStore(tmp_path)
    session = Session("eio")
    writer = store.create(session)
    failed = _fsync_fails_once(monkeypatch)
    _turn(session, 1)
    with pytest.raises(StoreError) as info:
        writer.flush()
    assert failed
    path = store.path("eio")
    assert str(info.value).startswith(
        f"could not write 4 events of session eio to {path}: Input/output error; none of "
        "the 4 events was stored; the stored session still ends before its first event"
    )
    writer.close()  # the closing flush stores them
    assert str(info.value) == (
        f"could not write 4 events of session eio to {path}: Input/output error; a later "
        "flush stored them after all: the stored session ends after seq 4, nothing is missing"
    )
    assert verify_jsonl(path.read_bytes(), expected_id="eio").ok


def test_run_after_an_fsync_error_reports_what_is_stored_at_exit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    failed = _fsync_fails_once(monkeypatch)
    ran = CliRunner().invoke(
        cli,
        ["run", "hello", "--session", "eio", "--tools", "none", "--store", str(tmp_path)],
        obj={"debug": False},
    )
    assert failed
    assert ran.exit_code == 2, ran.output
    (line,) = [x for x in ran.stderr.splitlines() if x.startswith("error: ")]
    assert "Input/output error" in line
    assert "none of the" not in line
    assert "a later flush stored them after all" in line
    store = JsonlStore(tmp_path)
    assert verify_jsonl(store.path("eio").read_bytes(), expected_id="eio").ok
    assert store.load("eio").undigested == 0
