"""``tapelog demo`` as a user runs it: a subprocess, offline, on both providers."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

from tapelog.audit import rebuild_requests
from tapelog.log import decode
from tapelog.store import JsonlStore

TAPELOG = str(Path(sys.executable).with_name("tapelog"))


def _demo(*args: str, store: Path) -> tuple[subprocess.CompletedProcess[str], str, float]:
    started = time.monotonic()
    done = subprocess.run(
        [TAPELOG, "demo", "--store", str(store), *args],
        # a wide "terminal", so table cells stay on one line
        env={**{k: v for k, v in os.environ.items() if k != "TAPELOG_PROVIDER"}, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    flat = " ".join(done.stdout.split())
    return done, flat, time.monotonic() - started


def _session_id(flat: str) -> str:
    return flat.split("tapelog show ", 1)[1].split()[0]


def test_demo_on_the_emulator(tmp_path: Path) -> None:
    done, flat, seconds = _demo(store=tmp_path)
    assert done.returncode == 0, done.stderr
    assert seconds < 60
    assert "✓ 5/5 requests rebuilt byte-exact from the log (the bytes the emulator received)." in (
        flat
    )
    assert "+word_count" in flat
    assert "header snapshot (resume)" in flat
    assert "header snapshot (initial)" in flat
    assert "notes.txt has 27 words." in flat
    assert "✗" not in flat
    # what the demo printed is what its stored log says
    session = JsonlStore(tmp_path).load(_session_id(flat)).session
    rebuilt = rebuild_requests(session.events)
    assert [(r.turn, r.step) for r in rebuilt] == [(1, 1), (1, 2), (2, 1), (2, 2), (3, 1)]
    reasons = [e.data["reason"] for e in session.events if e.type == "request/header"]
    assert reasons == ["initial", "resume"]

    # the inspection the demo suggests: every body file, and its digest as listed
    out = tmp_path / "bodies"
    listed = subprocess.run(
        [
            TAPELOG,
            "requests",
            _session_id(flat),
            "--store",
            str(tmp_path),
            "--json",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    rows = decode(listed.stdout)
    files = sorted(out.iterdir())
    assert [f.name for f in files] == [f"{i:04d}.json" for i in range(1, 6)]
    for row, file in zip(rows, files, strict=True):
        body = file.read_bytes()
        assert row["bytes"] == len(body)
        assert row["sha256"] == "sha256:" + hashlib.sha256(body).hexdigest()


def test_demo_on_the_local_model(tmp_path: Path) -> None:
    done, flat, seconds = _demo("--provider", "local", store=tmp_path)
    assert done.returncode == 0, done.stderr
    assert seconds < 60
    assert "provider local" in flat
    assert (
        "✓ 3/3 requests rebuilt byte-exact from the log (the invariant checker's comparison)."
        in flat
    )
    assert "+word_count" in flat
    assert "header snapshot (resume)" in flat
    session = JsonlStore(tmp_path).load(_session_id(flat)).session
    messages = [e for e in session.events if e.type == "assistant/message"]
    assert [m.data["source"]["provider"] for m in messages] == ["local"] * 3
    # the local model's real KV cache: later requests reuse the earlier prefix
    assert all(m.data["usage"]["cache_read"] > 0 for m in messages[1:])
