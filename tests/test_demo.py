"""``tapelog demo`` as a user runs it: a subprocess, offline, on both providers."""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tapelog.audit import rebuild_requests
from tapelog.cli import cli
from tapelog.cli._demo import LOCAL_NOTE
from tapelog.log import decode
from tapelog.log._api import Session
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


def _hints(stdout: str) -> list[str]:
    """The commands the demo prints to paste: the indented lines after "Inspect it:"."""
    lines = stdout.splitlines()
    start = lines.index("Inspect it:") + 1
    return [line.strip() for line in lines[start:] if line.startswith("  tapelog ")]


def _argv(command: str) -> list[str]:
    """A printed command as the shell splits it, run with this environment's tapelog."""
    program, *args = shlex.split(command)
    assert program == "tapelog"
    return [TAPELOG, *args]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.get("text", b.get("content", "")) for b in content)


def _answers_check_out(session: Session) -> list[int]:
    """Every number an answer states is a number the tool results right before it
    state (a scripted answer must not contradict its tools); returns the numbers.

    The word count is also checked against the text the model read.
    """
    results: list[str] = []
    checked: list[int] = []
    for event in session.events:
        if event.type == "tool/result":
            results.append(_text(event.data["content"]))
        elif event.type == "assistant/message":
            text = "".join(b["text"] for b in event.data["content"] if b["type"] == "text")
            stated = [int(n) for n in re.findall(r"\d+", text)]
            known = {int(n) for r in results for n in re.findall(r"\d+", r)}
            for number in stated:
                assert number in known, f"{text!r} states {number}; the tools said {results}"
            checked.extend(stated)
            results = []  # only the results of the step right before count
    read = [e for e in session.events if e.type == "tool/call" and e.data["name"] == "read_file"]
    [notes] = [
        _text(e.data["content"])
        for e in session.events
        if e.type == "tool/result" and e.data["call_id"] == read[0].data["call_id"]
    ]
    counted = [
        _text(e.data["content"])
        for e in session.events
        if e.type == "tool/result" and "words" in _text(e.data["content"])
    ]
    assert counted == [f"{len(notes.split())} words"]
    return checked


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
    assert "✗" not in flat
    # what the demo printed is what its stored log says
    session = JsonlStore(tmp_path).load(_session_id(flat)).session
    [words] = _answers_check_out(session)  # the one number stated: the word count
    assert f"notes.txt has {words} words." in flat
    rebuilt = rebuild_requests(session.events)
    assert [(r.turn, r.step) for r in rebuilt] == [(1, 1), (1, 2), (2, 1), (2, 2), (3, 1)]
    reasons = [e.data["reason"] for e in session.events if e.type == "request/header"]
    assert reasons == ["initial", "resume"]

    # the inspection the demo suggests, pasted as printed: every body file, and
    # its digest as listed
    show, cache, requests = _hints(done.stdout)
    shown = subprocess.run(_argv(show), capture_output=True, text=True, timeout=60, check=False)
    assert shown.returncode == 0, shown.stderr
    assert "word_count" in shown.stdout
    # the cache's bottom line, printed by the demo and first by `tapelog cache`
    audited = subprocess.run(_argv(cache), capture_output=True, text=True, timeout=60, check=False)
    assert audited.returncode == 0, audited.stderr
    line = audited.stdout.splitlines()[0]
    assert line.endswith("in 1 break: all from tool list changes."), line
    assert f"Cache: {line}" in done.stdout
    out = tmp_path / "bodies"
    listed = subprocess.run(
        [*_argv(requests), "--json"],
        cwd=tmp_path,
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
    # what the user is looking at is said before turn 1, so nonsense is not taken for a bug
    note = " ".join(LOCAL_NOTE.split())
    assert note in flat
    assert flat.index(note) < flat.index("> What files are in the workspace?")
    for fact in ("SmolLM2-135M", "135M-parameter", "48 tokens", "no tools in turn 1"):
        assert fact in note


@pytest.mark.parametrize("columns", ["80", None])
def test_the_commands_to_paste_are_never_wrapped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, columns: str | None
) -> None:
    """Piped (CliRunner) at 80 columns or at the default width: each hint is one whole line."""
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    monkeypatch.delenv("TAPELOG_PROVIDER", raising=False)
    # a long store path, so every hint is wider than 80 columns
    store = tmp_path / ("a-store-directory-with-a-long-name-" * 2) / "sessions"
    result = CliRunner().invoke(cli, ["demo", "--store", str(store)], obj={"debug": False})
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    [session_id] = [p.stem for p in store.glob("*.jsonl")]
    assert f"tapelog demo · provider emulator · session {session_id}" in lines
    show = f"tapelog show {session_id} --store {store}"
    requests = f"tapelog requests {session_id} --store {store} --out bodies"
    assert len(requests) > 80
    cache = f"tapelog cache {session_id} --store {store}"
    assert _hints(result.output) == [show, cache, requests]
    assert f"  {show}" in lines
    assert f"  {cache}" in lines
    assert f"  {requests}" in lines

    # run's usage line, with the session id, is one line too
    ran = CliRunner().invoke(
        cli, ["run", "hi", "--tools", "none", "--store", str(store)], obj={"debug": False}
    )
    assert ran.exit_code == 0, ran.output
    [usage] = [line for line in ran.stderr.splitlines() if line.startswith("[completed]")]
    assert len(usage) > 80
    [new_id] = {p.stem for p in store.glob("*.jsonl")} - {session_id}
    assert usage.endswith(f" · session {new_id}")
