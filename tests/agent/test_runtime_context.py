"""Runtime context: values in the session prefix, changes as one logged message each.

The acceptance scenario runs the real loop on the emulator with an injected
clock that crosses midnight and a real git repository whose branch switches
and whose tree becomes dirty mid-session: the system prompt and the prefix
bytes never change, each change is exactly one ``context/message``, every
request extends the one before (so the cache audit finds no break), and the
bytes the emulator received rebuild from the log.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import subprocess
import time
from collections.abc import Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tapelog import TapelogError
from tapelog.agent import ContextSource, Hooks, RuntimeContext, tool
from tapelog.agent._runtime_context import HEADING, MAX_VALUE
from tapelog.audit import cache_report
from tapelog.cli import cli
from tapelog.emulator import Emulator
from tapelog.log import decode, encode, register_secret
from tapelog.log._api import Event, FrozenList, Session
from tapelog.log._redact import forget_secrets
from tapelog.store import JsonlStore

from ._harness import LONG_SYSTEM, agent_on, assert_bytes_rebuild, types_of

PROVIDERS = ["deepseek", "openai", "anthropic"]
EVENING = datetime(2026, 11, 30, 23, 59, 30)


class Clock:
    """An injected clock the test moves by hand."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def git(repo: Path, *args: str) -> None:
    env = {
        **os.environ,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "a.txt").write_text("hello\n")
    git(path, "add", "a.txt")
    git(path, "commit", "-q", "-m", "first")
    return path


def reports(session: Session) -> list[Event]:
    return [
        e
        for e in session.events
        if e.type == "context/message" and e.data["source"]["kind"] == "runtime-context"
    ]


def changes(session: Session) -> list[tuple[str, str | None, str]]:
    return [
        (c["key"], c["from"], c["to"])
        for e in reports(session)
        for c in e.data["source"]["changes"]
    ]


def strip_breakpoints(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: strip_breakpoints(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [strip_breakpoints(v) for v in value]
    return value


def system_part(body: Mapping[str, Any]) -> bytes:
    """The system prompt as the wire sent it (Anthropic: ``system``; else the first message)."""
    if "system" in body:
        return encode(body["system"])
    first = body["messages"][0]
    assert first["role"] == "system"
    return encode(first)


def prefix_block(body: Mapping[str, Any]) -> Any:
    """The runtime context block: the first block of the first user message."""
    first = next(m for m in body["messages"] if m["role"] == "user")
    content = first["content"]
    block = content[0] if isinstance(content, list) else {"type": "text", "text": content}
    assert block["text"].startswith(HEADING)
    return strip_breakpoints(block)


def prefix_values(session: Session) -> dict[str, str]:
    assert session.header is not None
    text = session.header.prefix[0]["content"][0]["text"]
    lines = text.split("\n")
    assert lines[0] == HEADING
    return dict(line.split(": ", 1) for line in lines[1:])


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_midnight_and_a_branch_switch_are_one_message_each_and_never_break_the_cache(
    provider: str, repo: Path
) -> None:
    clock = Clock(EVENING)

    @tool
    def wait_a_minute() -> str:
        """Let a minute pass."""
        clock.now += timedelta(minutes=1)
        return "done"

    emulator = Emulator(
        script=[
            {"tool_calls": [{"name": "wait_a_minute", "arguments": "{}"}]},
            {"text": "It is past midnight."},
            {"text": "Nothing new."},
            {"text": "On another branch."},
            {"text": "The tree is dirty."},
            {"text": "Still the same."},
        ]
    )
    session = Session()
    context = [RuntimeContext(cwd=repo, clock=clock, environ={"SHELL": "/usr/bin/zsh"})]
    async with agent_on(
        emulator,
        provider=provider,
        session=session,
        system=LONG_SYSTEM,
        tools=[wait_a_minute],
        context=context,
    ) as agent:
        await agent.run("Wait a minute, please.")  # the date rolls over between its two steps
        await agent.run("Anything new?")
        git(repo, "switch", "-q", "-c", "other")
        await agent.run("And now?")
        (repo / "b.txt").write_text("new\n")
        await agent.run("And now?")
        await agent.run("And now?")

    assert prefix_values(session) == {
        "date": "2026-11-30",
        "cwd": str(repo),
        "git_branch": "main",
        "git_dirty": "no",
        "os": prefix_values(session)["os"],
        "shell": "zsh",
    }
    assert changes(session) == [
        ("date", "2026-11-30", "2026-12-01"),
        ("git_branch", "main", "other"),
        ("git_dirty", "no", "yes"),
    ]
    texts = [e.data["content"][0]["text"] for e in reports(session)]
    assert texts == [
        "Runtime context changed: date 2026-11-30 → 2026-12-01",
        "Runtime context changed: git_branch main → other",
        "Runtime context changed: git_dirty no → yes",
    ]
    # The date report waits for the tool result, then opens the next request.
    kinds = types_of(session)
    at = kinds.index("context/message")
    assert kinds[at - 3 : at + 2] == [
        "tool/call",
        "tool/result",
        "step/end",
        "context/message",
        "step/start",
    ]
    # Each report joins the very next request, as its last message.
    bodies = [decode(r.body) for r in emulator.received]
    assert len(bodies) == 6
    with_report = [
        i
        for i, b in enumerate(bodies)
        if "Runtime context changed" in encode(b["messages"][-1]).decode()
    ]
    assert with_report == [1, 3, 4]
    # The system prompt and the prefix never change; every request extends the one before.
    assert len({system_part(b) for b in bodies}) == 1
    assert len({encode(prefix_block(b)) for b in bodies}) == 1
    for before, after in itertools.pairwise(bodies):
        old, new = strip_breakpoints(before["messages"]), strip_breakpoints(after["messages"])
        assert new[: len(old)] == old
    headers = [e for e in session.events if e.type.startswith("request/header")]
    assert [(e.type, e.data.get("reason")) for e in headers] == [("request/header", "initial")]
    assert_bytes_rebuild(session, emulator)
    report = cache_report(session)
    assert [r.drop for r in report.requests] == [False] * 6
    assert all(not r.causes for r in report.requests)
    assert all(r.cached_reported > 0 for r in report.requests[1:])


async def test_a_resume_reuses_the_prefix_and_reports_only_what_changed_meanwhile(
    repo: Path, tmp_path: Path
) -> None:
    clock = Clock(EVENING)
    emulator = Emulator()
    session = Session()

    def runtime(cwd: Path = repo) -> list[ContextSource]:
        return [RuntimeContext(cwd=cwd, clock=clock, environ={})]

    async with agent_on(emulator, session=session, system=LONG_SYSTEM, context=runtime()) as a:
        await a.run("one")
        clock.now += timedelta(minutes=1)
        await a.run("two")  # reports the new date
    assert changes(session) == [("date", "2026-11-30", "2026-12-01")]
    first = session.header
    # A new loop instance (as a new process would be): the old change is not news.
    async with agent_on(emulator, session=session, system=LONG_SYSTEM, context=runtime()) as b:
        await b.run("three")
    assert changes(session) == [("date", "2026-11-30", "2026-12-01")]
    # The branch switched while nothing ran: the next instance says so, once.
    git(repo, "switch", "-q", "-c", "other")
    async with agent_on(emulator, session=session, system=LONG_SYSTEM, context=runtime()) as c:
        await c.run("four")
        await c.run("five")
    assert changes(session)[1:] == [("git_branch", "main", "other")]
    resumes = [e for e in session.events if e.data.get("reason") == "resume"]
    assert len(resumes) == 2
    assert all(e.data["header"] == first.to_json() for e in resumes)  # type: ignore[union-attr]
    report = cache_report(session)
    assert [r.drop for r in report.requests] == [False] * 5
    assert all(not r.causes for r in report.requests)
    # Another working directory is a session-frozen change: a fresh prefix (one
    # resume drift), and the watched values already told are not reported again.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    async with agent_on(
        emulator, session=session, system=LONG_SYSTEM, context=runtime(elsewhere)
    ) as d:
        await d.run("six")
    assert len(reports(session)) == 2
    assert prefix_values(session)["cwd"] == str(elsewhere)
    assert prefix_values(session)["date"] == "2026-12-01"
    assert [r.drop for r in cache_report(session).requests][-1] is True
    assert_bytes_rebuild(session, emulator)


class Tracker:
    """A user's own source: a watched ticket and a session-frozen team."""

    name = "tracker"
    watched = frozenset({"ticket"})

    def __init__(self) -> None:
        self.values = {"ticket": "ABC-1", "team": "core"}

    async def read(self) -> Mapping[str, str]:
        await asyncio.sleep(0)
        return dict(self.values)


async def test_a_custom_source_has_the_same_contract_and_its_values_are_cleaned(
    tmp_path: Path,
) -> None:
    tracker = Tracker()
    assert isinstance(tracker, ContextSource)
    seen: list[FrozenList] = []

    def session_prefix(seed: FrozenList) -> list[dict[str, Any]]:
        seen.append(seed)
        return [{"role": "user", "content": [{"type": "text", "text": "Project notes."}]}]

    emulator = Emulator()
    session = Session()
    clock = Clock(EVENING)
    sources = [RuntimeContext(cwd=tmp_path, clock=clock, environ={}), tracker]
    async with agent_on(
        emulator, session=session, context=sources, hooks=Hooks(session_prefix=session_prefix)
    ) as agent:
        await agent.run("one")
        tracker.values["ticket"] = "ABC-2\x1b[2J\u202e\n" + "x" * 500
        await agent.run("two")
        tracker.values["team"] = "platform"  # frozen: in the prefix only, never reported
        await agent.run("three")
        del tracker.values["ticket"]  # unknown this time: not a change
        await agent.run("four")
        tracker.values["ticket"] = "ABC-3"
        await agent.run("five")

    assert session.header is not None
    assert len(seen) == 1
    assert seen[0] == session.header.prefix[:1]
    assert session.header.prefix[1]["content"][0]["text"] == "Project notes."
    values = prefix_values_of(session.header.prefix[0]["content"][0]["text"])
    assert (values["ticket"], values["team"]) == ("ABC-1", "core")
    assert "git_branch" not in values  # not a git work tree: absent, no error
    told = changes(session)
    assert [(k, f) for k, f, _ in told] == [("ticket", "ABC-1"), ("ticket", told[0][2])]
    cleaned = told[0][2]
    assert cleaned == ("ABC-2[2J " + "x" * 500)[: MAX_VALUE - 1] + "…"
    assert told[1][2] == "ABC-3"
    assert reports(session)[0].data["source"]["changes"][0]["source"] == "tracker"
    assert_bytes_rebuild(session, emulator)


def prefix_values_of(text: str) -> dict[str, str]:
    lines = text.split("\n")
    assert lines[0] == HEADING
    return dict(line.split(": ", 1) for line in lines[1:])


class Bad:
    def __init__(self, name: str, values: Any, watched: frozenset[str] = frozenset()) -> None:
        self.name, self.values, self.watched = name, values, watched

    async def read(self) -> Any:
        return self.values


@pytest.mark.parametrize(
    ("sources", "message"),
    [
        ([Bad("a", {"date": "x"})], "context sources 'runtime' and 'a' both report 'date'"),
        ([Bad("a", {"two words": "x"})], "a key of context source 'a' must be"),
        ([Bad("a", {"k": 1})], "context source 'a' returned int for 'k'; values are text"),
        ([Bad("a", ["k"])], "context source 'a' must return a mapping"),
    ],
)
async def test_a_bad_custom_source_fails_the_turn_in_one_readable_line(
    sources: list[Any], message: str, tmp_path: Path
) -> None:
    runtime = RuntimeContext(cwd=tmp_path, environ={})
    session = Session()
    async with agent_on(Emulator(), session=session, context=[runtime, *sources]) as agent:
        with pytest.raises(TapelogError, match=message):
            await agent.run("hi")
    assert [e.data["reason"]["kind"] for e in session.events if e.type == "turn/end"] == ["error"]
    assert not any(e.type == "step/start" for e in session.events)


@pytest.mark.parametrize(
    ("sources", "message"),
    [
        ([Bad("a", {}), Bad("a", {})], "two context sources are named 'a'"),
        ([Bad("", {})], "a context source's name must be"),
        ([object()], "is not a context source"),
    ],
)
def test_sources_are_checked_when_the_agent_is_made(sources: list[Any], message: str) -> None:
    from tapelog.agent._runtime_context import ContextWatcher

    with pytest.raises(TapelogError, match=message):
        ContextWatcher(sources)


async def test_git_state_dirty_detached_and_absent(repo: Path, tmp_path: Path) -> None:
    runtime = RuntimeContext(cwd=repo, environ={"SHELL": "/bin/bash"})
    values = await runtime.read()
    assert (values["git_branch"], values["git_dirty"], values["shell"]) == ("main", "no", "bash")
    (repo / "untracked.txt").write_text("x")
    assert (await runtime.read())["git_dirty"] == "yes"
    git(repo, "switch", "-q", "--detach")
    assert (await runtime.read())["git_branch"] == "(detached)"
    outside = await RuntimeContext(cwd=tmp_path, environ={}).read()
    assert set(outside) == {"date", "cwd", "os"}
    missing = await RuntimeContext(cwd=repo, git=str(tmp_path / "no-git"), environ={}).read()
    assert "git_branch" not in missing


async def test_a_hung_git_never_blocks_the_event_loop(repo: Path, tmp_path: Path) -> None:
    slow = tmp_path / "slow-git"
    slow.write_text("#!/bin/sh\nexec sleep 30\n")
    slow.chmod(0o755)
    runtime = RuntimeContext(cwd=repo, git=str(slow), git_timeout=0.3, environ={})
    worst = 0.0

    async def ticker() -> None:
        nonlocal worst
        while True:
            before = time.monotonic()
            await asyncio.sleep(0.01)
            worst = max(worst, time.monotonic() - before)

    task = asyncio.create_task(ticker())
    started = time.monotonic()
    try:
        values = await runtime.read()
    finally:
        task.cancel()
    assert "git_branch" not in values
    assert time.monotonic() - started < 5
    assert worst < 0.2


async def test_a_branch_name_is_untrusted_text(repo: Path) -> None:
    name = "feat\u202e" + "x" * 240
    git(repo, "switch", "-q", "-c", name)
    register_secret("sk-branch-SECRET-0000")
    try:
        emulator = Emulator()
        session = Session()
        env = {"SHELL": "/opt/sk-branch-SECRET-0000"}
        async with agent_on(
            emulator, session=session, context=[RuntimeContext(cwd=repo, environ=env)]
        ) as agent:
            await agent.run("hi")
    finally:
        forget_secrets()
    values = prefix_values(session)
    assert values["git_branch"] == "feat" + "x" * (MAX_VALUE - 5) + "…"
    assert values["shell"] == "***"


def test_the_cli_flag_puts_the_workspace_context_in_the_prefix(repo: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    common = ["--provider", "emulator", "--tools", "none", "--store", str(store)]
    on = CliRunner().invoke(
        cli,
        ["run", "hi", "--session", "on", "--runtime-context", "--workspace", str(repo), *common],
        obj={"debug": False},
    )
    assert on.exit_code == 0, on.output
    off = CliRunner().invoke(cli, ["run", "hi", "--session", "off", *common], obj={"debug": False})
    assert off.exit_code == 0, off.output
    with_flag = JsonlStore(store).load("on").session
    values = prefix_values(with_flag)
    assert (values["cwd"], values["git_branch"]) == (str(repo.absolute()), "main")
    without = JsonlStore(store).load("off").session
    assert without.header is not None
    assert not without.header.prefix


async def test_changes_at_once_are_one_message_and_a_shadowed_report_is_told_again(
    repo: Path,
) -> None:
    clock = Clock(EVENING)
    emulator = Emulator()
    session = Session()
    context = [RuntimeContext(cwd=repo, clock=clock, environ={})]
    async with agent_on(emulator, session=session, context=context) as agent:
        await agent.run("one")
        clock.now += timedelta(minutes=1)
        git(repo, "switch", "-q", "-c", "other")
        await agent.run("two")
        assert [e.data["content"][0]["text"] for e in reports(session)] == [
            "Runtime context changed: date 2026-11-30 → 2026-12-01; git_branch main → other"
        ]
        # What a compaction does: one summary takes the place of everything so far.
        surface = session.surface
        session.append(
            "user/message",
            {
                "content": [{"type": "text", "text": "Summary: we talked."}],
                "source": {"kind": "compaction", "id": "c1"},
            },
            surface_op={"op": "replace", "start": surface[0], "end": surface[-1]},
            source_seqs=surface,
        )
        await agent.run("three")  # the report is shadowed: the model hears it again
        await agent.run("four")
    assert changes(session) == [
        ("date", "2026-11-30", "2026-12-01"),
        ("git_branch", "main", "other"),
        ("date", "2026-11-30", "2026-12-01"),
        ("git_branch", "main", "other"),
    ]
    assert len(reports(session)) == 2
    assert_bytes_rebuild(session, emulator)
