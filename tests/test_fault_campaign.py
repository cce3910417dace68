"""Fault campaign: over a hundred SIGKILLs of ``tapelog run`` mid-way through tool runs.

``tests/_fault_driver.py`` forks children that run the real command line
against the loopback emulator (multi-step turns: list a directory, read a
file, answer) and SIGKILLs them after random short delays, session after
session, each resumed by the next trial; a last run per session completes.
Then, for every session:

* no flushed event was lost: every flush a child reported (events and the
  SHA-256 of their lines, written after ``flush()`` returned) is a prefix of
  the final log, byte for byte;
* the log verifies: digests, turn and step structure, requests;
* every request the emulator received is rebuilt from the log byte for byte,
  in order (``rebuild_requests``, what ``tapelog requests`` writes); requests
  the log holds but the emulator never got are at most one per killed trial
  (a kill after the flush, before the send);
* no session file is empty or half-created, and no temporary file is left.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from tapelog.audit import encode_request, rebuild_requests
from tapelog.emulator import Emulator
from tapelog.store import JsonlStore
from tapelog.store._api import verify_jsonl

DRIVER = Path(__file__).with_name("_fault_driver.py")
KILLS = 110
SESSIONS = 6


def _script(rounds: int) -> list[dict[str, object]]:
    """Turns of three steps: two tool calls, then an answer."""
    one = [
        {"tool_calls": [{"name": "list_dir", "arguments": '{"path": "."}'}]},
        {"tool_calls": [{"name": "read_file", "arguments": '{"path": "a.txt"}'}]},
        {"text": "It says hello."},
    ]
    return one * rounds


def _is_subsequence(needles: list[bytes], haystack: list[bytes]) -> bool:
    it = iter(haystack)
    return all(any(n == h for h in it) for n in needles)


def test_random_sigkills_lose_no_flushed_event_and_every_request_rebuilds(
    tmp_path: Path, loopback_emulator: tuple[Emulator, int]
) -> None:
    emulator, port = loopback_emulator
    emulator.push(*_script(1500))
    root = tmp_path / "store"
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "a.txt").write_text("hello\n")
    report, result = tmp_path / "flushes.txt", tmp_path / "result.json"
    argv = [sys.executable, str(DRIVER), str(port), str(root), str(workspace)]
    argv += [str(report), str(result), "20261130", str(KILLS), str(SESSIONS)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=400, check=False)
    assert done.returncode == 0, done.stderr
    trials = json.loads(result.read_text())["trials"]
    kills = sum(t["killed"] for t in trials)
    assert kills >= 100, f"only {kills} kills landed"
    for trial in trials:
        if trial["final"]:
            log = Path(trial["log"]).read_text()
            assert trial["exit"] == 0, log
            assert "Traceback" not in log, log

    # Nothing half-created: every file in the store is a whole session.
    store = JsonlStore(root)
    names = sorted(p.name for p in root.iterdir() if p.is_file())
    assert names == sorted(f"fault-{i:02d}.jsonl" for i in range(SESSIONS)), names
    assert not list(root.glob(".*.tmp"))

    flushed: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for line in report.read_text().splitlines():
        session_id, count, digest = line.split()
        flushed[session_id].append((int(count), digest))
    received: dict[str, list[bytes]] = defaultdict(list)
    for request in emulator.received:
        for i in range(SESSIONS):
            if f"fault session fault-{i:02d}.".encode() in request.body:
                received[f"fault-{i:02d}"].append(request.body)
    killed_per_session = defaultdict(int)
    for trial in trials:
        killed_per_session[trial["session"]] += trial["killed"]

    interrupted = 0
    for i in range(SESSIONS):
        session_id = f"fault-{i:02d}"
        data = store.path(session_id).read_bytes()
        report_ok = verify_jsonl(data, expected_id=session_id)
        assert report_ok.ok, [str(p) for p in report_ok.problems]
        session = store.load(session_id).session
        lines = [e.encode() + b"\n" for e in session.events]
        assert flushed[session_id], f"{session_id}: no flush was reported"
        for count, digest in flushed[session_id]:
            assert count <= len(lines), f"{session_id}: {count} events were flushed"
            got = hashlib.sha256(b"".join(lines[:count])).hexdigest()
            assert got == digest, f"{session_id}: the first {count} flushed events changed"
        bodies = [encode_request(r.request) for r in rebuild_requests(session)]
        sent = received[session_id]
        assert sent, f"{session_id}: the emulator got no request"
        assert _is_subsequence(sent, bodies), f"{session_id}: a received request did not rebuild"
        assert len(bodies) - len(sent) <= killed_per_session[session_id]
        interrupted += sum(
            1
            for e in session.events
            if e.type == "turn/end" and e.data["reason"]["kind"] == "interrupted"
        )
    # the kills landed inside turns, not only before or after them
    assert interrupted >= 20, interrupted
    assert os.environ.get("TAPELOG_CHECK") == "1"
