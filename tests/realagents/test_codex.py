"""Codex CLI (0.171.0) over the Responses API, offline: straight at the emulator
and through ``tapelog proxy``; two turns (``exec``, then ``exec resume --last``),
Codex's own ``exec_command`` tool run in each."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from proxy._helpers import assert_rebuilds, serve, sessions_in
from proxy._responses_helpers import assert_carried, audit_commands, recorded_proxy
from tapelog.emulator import Emulator

from ._codex import SCRIPT, Codex


def _items(body: Any, kind: str) -> list[Any]:
    return [item for item in body["input"] if item.get("type") == kind]


def test_codex_two_turns_straight_at_the_emulator(tmp_path: Path) -> None:
    emu = Emulator(script=SCRIPT)
    with serve(emu.app) as port:
        codex = Codex(tmp_path, f"http://127.0.0.1:{port}/v1")
        first = codex.exec("list the files")
        assert first.returncode == 0, first.stderr
        second = codex.exec("resume", "--last", "what does notes.txt say?")
        assert second.returncode == 0, second.stderr
    assert "The repository holds notes.txt." in first.stdout
    assert "remember the milk" in second.stdout
    assert [r.path for r in emu.received] == ["/v1/responses"] * 4
    assert [r.status for r in emu.received] == [200] * 4
    bodies = [r.json() for r in emu.received]
    assert all(b["stream"] is True and b["store"] is False for b in bodies)
    # Codex ran its tool: the outputs it sent back hold what ls and cat printed.
    outputs = [item["output"] for item in _items(bodies[3], "function_call_output")]
    assert "notes.txt" in outputs[0]
    assert "remember the milk" in outputs[1]
    # The resumed turn sends the first turn back with its encrypted reasoning
    # (the emulator refuses an altered one: all four answers were 200).
    sealed = [item["encrypted_content"] for item in _items(bodies[3], "reasoning")]
    assert len(sealed) == 2
    assert all(isinstance(s, str) for s in sealed)
    # One prompt_cache_key (the session) for all requests; a turn id per turn in
    # client_metadata (and the x-codex-turn-metadata header), outside the prompt:
    # each request extends the one before, so it reads all of it from the cache.
    assert len({b["prompt_cache_key"] for b in bodies}) == 1
    turns = [b["client_metadata"]["turn_id"] for b in bodies]
    assert turns[0] == turns[1] != turns[2] == turns[3]
    usage = [r.usage for r in emu.received if r.usage is not None]
    assert len(usage) == 4
    for before, after in itertools.pairwise(usage):
        cached = after["input_tokens_details"]["cached_tokens"]
        assert cached >= before["input_tokens"] - 128


def test_codex_two_turns_through_the_proxy(tmp_path: Path) -> None:
    emu = Emulator(script=SCRIPT)
    store = tmp_path / "sessions"
    lines: list[str] = []
    with serve(emu.app) as port, recorded_proxy(store, port, lines) as (proxy_port, recording):
        codex = Codex(tmp_path, f"http://127.0.0.1:{proxy_port}/v1")
        first = codex.exec("list the files")
        assert first.returncode == 0, first.stderr
        second = codex.exec("resume", "--last", "what does notes.txt say?")
        assert second.returncode == 0, second.stderr
    assert "The repository holds notes.txt." in first.stdout
    assert "remember the milk" in second.stdout
    assert [r.path for r in emu.received] == ["/openai/v1/responses"] * 4
    assert [r.status for r in emu.received] == [200] * 4
    assert_carried(recording.bodies, emu)
    sessions = sessions_in(store)  # each passes verify first
    assert_rebuilds(sessions, emu)
    # One session: each request continues the one before (Codex sends back
    # its items with their own ids and status: a logged replace of the answer).
    assert len(sessions) == 1
    ((session_id, _),) = sessions.items()
    audit = audit_commands(store, session_id, tmp_path)
    assert [row["index"] for row in audit["requests"]] == [1, 2, 3, 4]
    assert [line.split(";")[1:2] for line in lines[1:]] == [
        [" client changed input[4]"],
        [" client changed input[7]"],
        [" client changed input[9]"],
    ]
