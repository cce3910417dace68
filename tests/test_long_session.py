"""The long-session acceptance test: cheap, auditable, byte-exact for 60+ steps.

A scripted session on the emulator with large tool results, trimming, one
automatic compaction, one system-prompt change and one process restart (a new
loop instance over the reopened store). The invariant checker is on throughout
(tests/conftest.py). Then, through the real CLI: ``tapelog requests --out``
equals the bytes the emulator received for every loop request, and
``tapelog cache --json`` explains every drop in reported cache by a logged
cause, none ``unexplained``, with efficiency 1.0.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from tapelog.agent import Agent, CompactionPolicy, RetryPolicy, TrimPolicy, tool
from tapelog.emulator import Emulator
from tapelog.llm import make_client
from tapelog.log import decode
from tapelog.log._api import Event, LlmCallConfig, Session
from tapelog.store import JsonlStore

TAPELOG = str(Path(sys.executable).with_name("tapelog"))
TURNS = 20
SYSTEM_CHANGE_AT = 8
RESTART_AT = 12
SUMMARY_MARK = "Summarise the conversation so far"


def _is_summary_call(body: bytes) -> bool:
    """The one-shot summary request ends with the summary instruction."""
    last = decode(body)["messages"][-1]
    return last["role"] == "user" and str(last["content"]).startswith(SUMMARY_MARK)


@tool
def fetch(page: int) -> str:
    """Fetch one page of the manual.

    Args:
        page: Page number.
    """
    line = f"page {page}: the quick brown fox jumps over the lazy dog. "
    return (line * 90)[:5000]


def _step_replies() -> Iterator[dict[str, Any]]:
    for turn in range(1, TURNS + 1):
        yield {"tool_calls": [{"name": "fetch", "arguments": f'{{"page": {2 * turn}}}'}]}
        yield {"tool_calls": [{"name": "fetch", "arguments": f'{{"page": {2 * turn + 1}}}'}]}
        yield {"text": f"Pages {2 * turn} and {2 * turn + 1} are about a fox."}


def _agent(session: Session, http: httpx.AsyncClient, writer: Any, system: str) -> Agent:
    config = LlmCallConfig(provider="deepseek", model="deepseek-chat")
    client = make_client(
        config,
        base_url="http://emulator/deepseek",
        http_client=http,
        env={"DEEPSEEK_API_KEY": "sk-long"},
    )
    return Agent(
        session,
        client,
        config=config,
        system=system,
        tools=[fetch],
        writer=writer,
        retry=RetryPolicy(base_delay=0.0),
        compaction=CompactionPolicy(context_window=16_000, threshold=0.8, keep_messages=8),
        trimming=TrimPolicy(
            max_chars=3000, head_chars=500, tail_chars=300, batch_chars=12_000, min_age_turns=2
        ),
    )


async def _run_session(store: JsonlStore, emulator: Emulator) -> str:
    replies = _step_replies()

    def feed(event: Event) -> None:
        # One scripted reply per loop request; the one-shot summary call gets
        # the emulator's default answer, a short line.
        if event.type == "step/start":
            emulator.push(next(replies))

    system = "You read manual pages with the fetch tool.\nAnswer in one sentence."
    session = Session("long-session")
    async with httpx.AsyncClient(transport=emulator.transport(), timeout=60) as http:
        writer = store.create(session)
        session.subscribe(feed)
        agent = _agent(session, http, writer, system)
        for turn in range(1, TURNS + 1):
            if turn == SYSTEM_CHANGE_AT:
                agent.system = system + "\nCite page numbers."
            if turn == RESTART_AT:
                writer.close()
                session, writer = store.open(session.id)  # what a new process does
                session.subscribe(feed)
                agent = _agent(session, http, writer, agent.system or "")
            result = await agent.run(f"Read pages {2 * turn} and {2 * turn + 1}.")
            assert result.reason["kind"] == "completed", result.reason
        writer.close()
    return session.id


def _cli(*args: str, store: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TAPELOG_STORE": str(store)}
    return subprocess.run(
        [TAPELOG, *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


async def test_a_long_session_stays_byte_exact_and_every_cache_drop_is_explained(
    tmp_path: Path,
) -> None:
    emulator = Emulator()
    store_dir = tmp_path / "store"
    session_id = await _run_session(JsonlStore(store_dir), emulator)
    events = [
        decode(line) for line in (store_dir / f"{session_id}.jsonl").read_bytes().splitlines()
    ]
    types = [e.get("type") for e in events[1:]]
    steps = types.count("step/start")
    assert steps >= 60
    starts = [e["data"] for e in events[1:] if e["type"] == "compact/start"]
    assert [s["trigger"] for s in starts] == ["auto"], "exactly one automatic compaction"
    assert types.count("compact/end") == 1
    trims = [
        e for e in events[1:] if e["type"] == "tool/result" and e.get("surface_op") != "append"
    ]
    assert len(trims) >= 4, "old tool results were trimmed (in batches)"
    headers = [e["data"].get("reason") for e in events[1:] if e["type"] == "request/header"]
    assert headers == ["initial", "resume"]
    assert types.count("request/header-delta") == 1, "the system prompt change"

    # Every loop request rebuilds byte-exact from the log, through the real CLI.
    out = tmp_path / "bodies"
    rebuilt = _cli("requests", session_id, "--out", str(out), store=store_dir)
    assert rebuilt.returncode == 0, rebuilt.stderr
    loop_bodies = [r.body for r in emulator.received if not _is_summary_call(r.body)]
    assert len(emulator.received) == len(loop_bodies) + 1
    files = sorted(out.iterdir())
    assert len(files) == steps == len(loop_bodies)
    for path, body in zip(files, loop_bodies, strict=True):
        assert path.read_bytes() == body, path.name

    # The summary call reused the conversation's cached prefix.
    summary = next(e["data"] for e in events[1:] if e["type"] == "compact/summary")
    assert summary["usage"]["cache_read"] > 0

    # Every drop in reported cache has a logged cause; the emulator is deterministic.
    audit = _cli("cache", session_id, "--json", store=store_dir)
    assert audit.returncode == 0, audit.stderr
    report = decode(audit.stdout)
    rows = report["requests"]
    assert len(rows) == steps
    kinds = {c["kind"] for row in rows for c in row["causes"]}
    assert "unexplained" not in kinds
    assert {"header-delta", "trim", "compaction"} <= kinds
    for before, row in itertools.pairwise(rows):
        if row["cached_reported"] < before["prompt_tokens"] // 2 and row["index"] > 1:
            assert row["drop"], row
            assert row["causes"], row
    assert report["totals"]["efficiency"] == 1.0
    assert report["totals"]["hit_ratio"] > 0.5
