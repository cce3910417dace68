"""Tamper evidence: digests at every flush, and load and verify reading lines alike.

Every flush of a writer ends with a ``log/digest`` event carrying the SHA-256
of every byte of the session file before its line. ``verify`` (and ``load``)
check each one, so an edit before the last digest, a removed or renumbered
line, or a cut is reported; a log that ends with events after its last digest
(and no torn line) is reported too. A line with a duplicated JSON key is
refused by ``load``, ``show``, ``requests`` and ``run`` exactly as by
``verify``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from tapelog import CorruptLogError, Session, UndigestedEventsError
from tapelog.cli import cli
from tapelog.log import decode, encode
from tapelog.store import JsonlStore
from tapelog.store._api import verify_jsonl


def _invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), obj={"debug": False})


def _turn(session: Session, turn: int, text: str) -> None:
    session.append("turn/start", {"turn": turn})
    session.append(
        "user/message",
        {"content": [{"type": "text", "text": text}], "source": {"kind": "user"}},
        surface_op="append",
    )
    session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


def _three_flushes(store: JsonlStore, session_id: str = "t1") -> Path:
    session = Session(session_id)
    with store.create(session) as writer:
        for turn in range(3):
            _turn(session, turn, f"prompt number {turn}")
            writer.flush()
    return store.path(session_id)


def _problems(path: Path) -> list[str]:
    return [str(p) for p in verify_jsonl(path.read_bytes(), expected_id=path.stem).problems]


# --- what a digest is ----------------------------------------------------------


def test_each_flush_ends_with_the_sha256_of_every_byte_before_it(tmp_path: Path) -> None:
    path = _three_flushes(JsonlStore(tmp_path))
    data = path.read_bytes()
    lines = data.splitlines(keepends=True)
    digests = [(i, decode(x)) for i, x in enumerate(lines) if b'"log/digest"' in x]
    assert [i for i, _ in digests] == [4, 8, 12]  # line 1 is the header
    assert lines[-1] == lines[digests[-1][0]]  # the file ends with a digest
    for index, event in digests:
        before = b"".join(lines[:index])
        assert event["data"] == {
            "bytes": len(before),
            "sha256": hashlib.sha256(before).hexdigest(),
        }
    report = verify_jsonl(data, expected_id="t1")
    assert report.ok
    assert report.digest is not None
    assert (report.digest.seq, report.digest.line) == (11, 13)


def test_show_prints_the_last_digest_and_verify_json_gives_it(tmp_path: Path) -> None:
    path = _three_flushes(JsonlStore(tmp_path))
    last = decode(path.read_bytes().splitlines()[-1])["data"]
    shown = _invoke("show", str(path))
    assert shown.exit_code == 0, shown.output
    assert (
        f"last digest: seq 11 · the first {last['bytes']} bytes of the log have sha256 "
        f"{last['sha256']}"
    ) in shown.stdout
    verified = _invoke("verify", "t1", "--store", str(tmp_path), "--json")
    assert verified.exit_code == 0, verified.output
    out = json.loads(verified.stdout)
    assert out["ok"] is True
    assert out["problems"] == []
    assert out["digest"] == {"seq": 11, "line": 13, **last}
    assert out["stats"]["events"] == 12


# --- what digests detect (issue 8, item 18) ---------------------------------------


def test_a_flipped_letter_in_a_logged_message_fails_verify_and_load(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    path = _three_flushes(store)
    data = path.read_bytes()
    assert data.count(b"prompt number 1") == 1
    path.write_bytes(data.replace(b"prompt number 1", b"prompt numbex 1"))
    assert _problems(path) == [
        "line 9 (seq 7): the digest does not match the first "
        f"{len(b''.join(data.splitlines(keepends=True)[:8]))} bytes of the file: they were "
        "changed after the digest was written (a line edited, removed, added or reordered), "
        "after line 5 (the last digest that matches)"
    ]
    with pytest.raises(CorruptLogError, match=r"line 9 \(seq 7\): the digest does not match"):
        store.load("t1")


def test_a_deleted_last_line_fails_verify(tmp_path: Path) -> None:
    path = _three_flushes(JsonlStore(tmp_path))
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:-1]))
    assert _problems(path) == [
        "line 10 (seq 8): 3 events from this line on come after the last digest "
        "(line 9), but every write of a tapelog writer ends with a digest: the digest that "
        "closed them was removed, or lines were added by another program (or, rarely, a crash "
        "cut a long write); look at them, then resume the session with --accept-undigested "
        "to keep them under a new digest"
    ]


def test_a_removed_turn_end_with_renumbered_seqs_fails_verify(tmp_path: Path) -> None:
    path = _three_flushes(JsonlStore(tmp_path))
    events = [decode(x) for x in path.read_bytes().splitlines()[1:]]
    header = path.read_bytes().splitlines()[0]
    kept = [e for e in events if not (e["type"] == "turn/end" and e["data"]["turn"] == 1)]
    for seq, event in enumerate(kept):
        event["seq"] = seq
    path.write_bytes(b"\n".join([header, *(encode(e) for e in kept)]) + b"\n")
    digest, structure = _problems(path)
    assert digest.startswith("line 8 (seq 6): the digest covers the first ")
    assert digest.endswith(
        "lines were removed or added after line 5 (the last digest that matches)"
    )
    assert structure.startswith("line 9 (seq 7): turn 2 starts while turn 1 (seq 4) is still open")


def test_a_long_write_cut_inside_fails_verify_and_open_covers_it_once_accepted(
    tmp_path: Path,
) -> None:
    store = JsonlStore(tmp_path)
    path = _three_flushes(store)
    lines = path.read_bytes().splitlines(keepends=True)
    # what a kill inside a long last write may leave: whole lines, then a piece; a
    # forger can leave the same, so only the user can accept them (test_undigested.py)
    path.write_bytes(b"".join(lines[:-2]) + lines[-2][:7])
    report = verify_jsonl(path.read_bytes(), expected_id="t1")
    assert [p.line for p in report.problems] == [10]
    assert "dropped an incomplete final line" in report.warnings[0]
    with pytest.raises(UndigestedEventsError):
        store.open("t1")
    session, writer = store.open("t1", accept_undigested=True)
    writer.close()
    assert session.events[-1].type == "log/digest"  # the cut write is covered again
    assert _problems(path) == []
    assert store.load("t1").undigested == 0


def test_a_fork_keeps_its_parents_digests_and_checks_only_its_own(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    _three_flushes(store, "parent")
    parent = store.load("parent").session
    child = parent.fork(7, id="child")  # after turn 1's digest
    with store.create(child) as writer:
        _turn(child, 5, "the child's own turn")
        writer.flush()
    assert _problems(store.path("child")) == []
    loaded = store.load("child")
    assert loaded.digest is not None
    assert loaded.digest.seq == len(child) - 1


def test_digests_are_the_same_bytes_whatever_appends_them(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    path = _three_flushes(store)
    resumed, writer = store.open("t1")
    with writer:
        _turn(resumed, 3, "after a resume")
    assert _problems(path) == []
    lines = path.read_bytes().splitlines(keepends=True)
    last = decode(lines[-1])["data"]
    assert last["sha256"] == hashlib.sha256(b"".join(lines[:-1])).hexdigest()


# --- duplicated keys: load and verify agree (item 15) ----------------------------


def _with_duplicate_key(store: JsonlStore) -> Path:
    session = Session("dup")
    with store.create(session):
        _turn(session, 1, "the real prompt")
    path = store.path("dup")
    data = path.read_bytes()
    forged = data.replace(
        b'"text":"the real prompt"', b'"text":"the real prompt","text":"a forged prompt"'
    )
    assert forged != data
    path.write_bytes(forged)
    return path


def test_a_line_with_a_duplicated_key_is_refused_by_load_as_by_verify(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    path = _with_duplicate_key(store)
    message = (
        "line 3 (seq 1): the key 'text' appears twice in one object; tapelog never writes a "
        "duplicated key, so the line was edited or written by another program (a reader "
        "would see only one of the two values)"
    )
    problems = _problems(path)
    assert problems[0] == message
    # and the digest the writer logged when it closed says the bytes changed
    assert problems[1].startswith("line 5 (seq 3): the digest covers the first 384 bytes")
    assert len(problems) == 2
    with pytest.raises(CorruptLogError) as info:
        store.load("dup")
    assert str(info.value) == f"session dup ({path}): {message}"
    for command in (["show", "dup"], ["requests", "dup"], ["verify", "dup"]):
        result = _invoke(*command, "--store", str(tmp_path))
        assert result.exit_code in (1, 2), result.output
        assert "the key 'text' appears twice in one object" in result.output
    appended = _invoke(
        "run", "more", "--session", "dup", "--tools", "none", "--store", str(tmp_path)
    )
    assert appended.exit_code == 2
    assert "the key 'text' appears twice in one object" in appended.output
    assert path.read_bytes().count(b"\n") == 5  # nothing was appended after it
