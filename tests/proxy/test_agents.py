"""Several agents of one client through the proxy: each conversation its own session.

A subagent that sends the main conversation's first exchange as its history,
under its own system prompt and tools (Qwen Code's memory extractor, Claude
Code's Task subagents), branches off into a session linked to the main one;
the main session's audit shows no break it did not make. The same agent that
edits its own system prompt or reorders its tools stays one session, with
the break named.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
from click.testing import CliRunner
from starlette.testclient import TestClient

from tapelog import Session
from tapelog.audit import cache_report
from tapelog.cli import cli
from tapelog.emulator import Emulator
from tapelog.log import decode
from tapelog.serve import create_app
from tapelog.store import JsonlStore

from ._helpers import assert_rebuilds, in_process, post, sessions_in

MODEL = "deepseek-chat"
PATH = "/v1/chat/completions"
MAIN_SYSTEM = "\n".join(
    ["You are Qwen Code, a non-interactive CLI agent for software engineering."]
    + [f"Rule {i}: keep to the conventions of the project you work in." for i in range(30)]
)
SUB_SYSTEM = "\n".join(
    ["You are now acting as the managed memory extraction subagent."]
    + [f"Step {i}: read the conversation and write down what is worth keeping." for i in range(20)]
)


def _tools(*names: str) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {"name": n, "description": f"{n} tool", "parameters": {"type": "object"}},
        }
        for n in names
    ]


MAIN_TOOLS = _tools("read_file", "write_file", "edit", "glob", "grep", "shell")
SUB_TOOLS = _tools("read_memory", "write_memory", "list_memory")


def _body(system: str, tools: list[dict[str, Any]], messages: list[Any]) -> dict[str, Any]:
    return {
        "model": MODEL,
        "messages": [{"role": "system", "content": system}, *messages],
        "tools": tools,
    }


async def _send(http: httpx.AsyncClient, body: dict[str, Any], **headers: str) -> str:
    response = await post(http, PATH, body, **headers)
    assert response.status_code == 200, response.text
    text: str = response.json()["choices"][0]["message"]["content"]
    return text


def _origin(session: Session) -> dict[str, Any] | None:
    first = session.events[0]
    return dict(first.data) if first.type == "session/origin" else None


def _header_causes(session: Session) -> list[str]:
    report = cache_report(session)
    return [
        c.kind
        for r in report.requests
        for c in r.causes
        if c.kind in ("header-delta", "header-fallback", "client-edit")
    ]


async def _main_and_subagent(tmp_path: Path) -> Emulator:
    """The Qwen Code case: main request, then a memory subagent whose history is
    the main conversation's first exchange; then the main agent goes on."""
    async with in_process(tmp_path) as (_, emu, http):
        first = [{"role": "user", "content": "Say hello"}]
        hello = await _send(http, _body(MAIN_SYSTEM, MAIN_TOOLS, first))
        exchange = [*first, {"role": "assistant", "content": hello}]
        await _send(
            http,
            _body(SUB_SYSTEM, SUB_TOOLS, [*exchange, {"role": "user", "content": "Extract."}]),
        )
        await _send(
            http, _body(MAIN_SYSTEM, MAIN_TOOLS, [*exchange, {"role": "user", "content": "More"}])
        )
    return emu


async def test_a_subagent_with_the_main_history_gets_its_own_linked_session(
    tmp_path: Path,
) -> None:
    emu = await _main_and_subagent(tmp_path)
    sessions = sessions_in(tmp_path)
    assert len(sessions) == 2
    (main,) = [s for s in sessions.values() if _origin(s) is None]
    (sub,) = [s for s in sessions.values() if _origin(s) is not None]
    origin = _origin(sub)
    assert origin is not None
    assert origin["parent"] == main.id
    assert sub.info.parent == main.id
    assert sub.info.seed_length is None
    turn_end = next(e for e in main.events if e.type == "turn/end")
    assert origin["parent_seq"] == turn_end.seq
    assert "system prompt and tools differ" in origin["why"]
    # the main session holds only the main agent's two requests, unbroken
    assert [e.data["reason"] for e in main.events if e.type == "request/header"] == ["initial"]
    assert not [e for e in main.events if e.type == "request/header-delta"]
    assert not [e for e in main.events if isinstance(e.surface_op, dict)]
    assert _header_causes(main) == []
    assert len(cache_report(main).requests) == 2
    # the subagent's session is its own conversation from the start
    assert [e.data["reason"] for e in sub.events if e.type == "request/header"] == ["initial"]
    assert sub.header is not None
    assert sub.header.system == SUB_SYSTEM
    assert_rebuilds(sessions, emu)


async def test_the_same_agent_that_edits_its_system_prompt_keeps_one_session(
    tmp_path: Path,
) -> None:
    """A timestamp in the agent's own system prompt, then its tools reordered:
    one session, each change a named break."""
    async with in_process(tmp_path) as (_, emu, http):
        messages: list[Any] = [{"role": "user", "content": "hi"}]
        systems = [
            MAIN_SYSTEM + "\nToday is 2026-12-01 10:00.",
            MAIN_SYSTEM + "\nToday is 2026-12-01 10:05.",
            MAIN_SYSTEM + "\nToday is 2026-12-01 10:05.",
        ]
        tools = [MAIN_TOOLS, MAIN_TOOLS, list(reversed(MAIN_TOOLS))]
        for turn, (system, tool_list) in enumerate(zip(systems, tools, strict=True)):
            text = await _send(http, _body(system, tool_list, messages))
            messages += [
                {"role": "assistant", "content": text},
                {"role": "user", "content": f"next {turn}"},
            ]
    sessions = sessions_in(tmp_path)
    assert len(sessions) == 1
    (session,) = sessions.values()
    changes = [e for e in session.events if e.type.startswith("request/header")]
    assert [e.data.get("reason") for e in changes] == ["initial", None, "fallback"]
    assert "system" in changes[1].data  # the delta names what changed
    assert [t["name"] for t in changes[2].data["header"]["tools"]] == [
        t["function"]["name"] for t in reversed(MAIN_TOOLS)
    ]
    assert _header_causes(session) == ["header-delta", "header-fallback"]
    assert_rebuilds(sessions, emu)


async def test_a_rewritten_prompt_with_the_same_tools_is_the_same_agent(tmp_path: Path) -> None:
    async with in_process(tmp_path) as (_, _emu, http):
        messages: list[Any] = [{"role": "user", "content": "hi"}]
        text = await _send(http, _body(MAIN_SYSTEM, MAIN_TOOLS, messages))
        messages += [{"role": "assistant", "content": text}, {"role": "user", "content": "go"}]
        await _send(http, _body("Something else entirely.", MAIN_TOOLS, messages))
    assert len(sessions_in(tmp_path)) == 1


async def test_a_different_client_conversation_id_branches(tmp_path: Path) -> None:
    """The same agent's header, but the client names another conversation
    (``prompt_cache_key``): its own session, linked, with the signal logged."""
    async with in_process(tmp_path) as (_, emu, http):
        first = [{"role": "user", "content": "hello"}]
        body = _body(MAIN_SYSTEM, MAIN_TOOLS, first)
        hello = await _send(http, body, session_id="conv-1")
        more = [*first, {"role": "assistant", "content": hello}, {"role": "user", "content": "on"}]
        await _send(http, _body(MAIN_SYSTEM, MAIN_TOOLS, more), session_id="conv-1")
        await _send(http, _body(MAIN_SYSTEM, MAIN_TOOLS, more), session_id="conv-2")
    sessions = sessions_in(tmp_path)
    assert len(sessions) == 2
    origins = sorted((_origin(s) or {}).get("client", {}).get("id", "") for s in sessions.values())
    assert origins == ["conv-1", "conv-2"]
    (branch,) = [s for s in sessions.values() if s.info.parent is not None]
    origin = _origin(branch)
    assert origin is not None
    assert origin["client"] == {"signal": "session_id", "id": "conv-2"}
    assert "session_id differs" in origin["why"]
    assert_rebuilds(sessions, emu)


async def test_the_family_is_shown_together_in_sessions_and_serve(tmp_path: Path) -> None:
    await _main_and_subagent(tmp_path)
    other = tmp_path / "other"
    async with in_process(other) as (_, _emu, http):  # a later, unrelated conversation
        await _send(http, _body(MAIN_SYSTEM, MAIN_TOOLS, [{"role": "user", "content": "x"}]))
    for path in other.glob("*.jsonl"):
        path.rename(tmp_path / path.name)
    sessions = sessions_in(tmp_path)
    (sub,) = [s for s in sessions.values() if s.info.parent is not None]
    main = sessions[sub.info.parent or ""]
    (later,) = [s for s in sessions.values() if s.id not in (sub.id, main.id)]
    result = CliRunner().invoke(cli, ["sessions", "--store", str(tmp_path)], terminal_width=200)
    assert result.exit_code == 0, result.output
    rows = [line for line in result.output.splitlines() if "proxy-" in line]
    ids = [row.split("│")[1].strip().removeprefix("└ ") for row in rows]
    assert ids == [later.id, main.id, sub.id]
    assert f"└ {sub.id}" in rows[2]
    assert "└" not in rows[0] + rows[1]
    shown = f"branched from {main.id}"
    assert shown in CliRunner().invoke(cli, ["show", sub.id, "--store", str(tmp_path)]).output
    page = tmp_path / "report.html"
    reported = CliRunner().invoke(
        cli, ["report", sub.id, "-o", str(page), "--store", str(tmp_path)]
    )
    assert reported.exit_code == 0, reported.output
    assert f"{shown} at seq " in page.read_text()  # the timeline's first entry
    with TestClient(create_app(JsonlStore(tmp_path)), base_url="http://127.0.0.1") as client:
        html = client.get("/").text
        family = client.get(f"/s/{sub.id}").text
    assert "<b>Family</b>" in family
    assert f'<a href="/s/{main.id}">' in family
    order = re.findall(r'<tr data-id="([^"]+)">', html)
    assert order == [later.id, main.id, sub.id]
    row = html[html.index(f'<tr data-id="{sub.id}">') :]
    assert '<td data-col="id" class="nest-1">' in row[: row.index("</tr>")]


async def test_the_cache_audit_of_a_family_gives_each_member_and_the_total(
    tmp_path: Path,
) -> None:
    await _main_and_subagent(tmp_path)
    sessions = sessions_in(tmp_path)
    (sub,) = [s for s in sessions.values() if s.info.parent is not None]
    main = sessions[sub.info.parent or ""]
    runner = CliRunner()
    where = ["--store", str(tmp_path)]
    for asked in (sub.id, main.id):  # any member names the family
        result = runner.invoke(cli, ["cache", asked, "--family", "--json", *where])
        assert result.exit_code == 0, result.output
        family = decode(result.output)
        assert [(m["session"], m["depth"]) for m in family["members"]] == [
            (main.id, 0),
            (sub.id, 1),
        ]
    reports = [cache_report(main), cache_report(sub)]
    for member, report in zip(family["members"], reports, strict=True):
        assert member["totals"] == report.totals.to_json()
        full = report.totals.prompt_tokens - report.totals.cached_reported
        assert member["full_price_tokens"] == full
    assert family["members"][0]["why"] == "main conversation: cold start"
    assert family["members"][1]["why"] == (
        "another agent (system prompt and tools differ): cold start"
    )
    totals = family["totals"]
    assert totals["requests"] == 3
    assert totals["prompt_tokens"] == sum(r.totals.prompt_tokens for r in reports)
    assert totals["full_price_tokens"] == sum(m["full_price_tokens"] for m in family["members"])
    text = runner.invoke(cli, ["cache", main.id, "--family", *where], terminal_width=200)
    assert text.exit_code == 0, text.output
    assert f"└ {sub.id}" in text.output
    assert "2 session(s) · 3 request(s)" in text.output
    missing = runner.invoke(cli, ["cache", "nosuch", "--family", *where])
    assert missing.exit_code != 0
    assert "Traceback" not in missing.output
    assert "no session 'nosuch'" in missing.output


async def test_the_subagents_next_request_continues_its_own_session(tmp_path: Path) -> None:
    async with in_process(tmp_path) as (_, emu, http):
        first = [{"role": "user", "content": "Say hello"}]
        hello = await _send(http, _body(MAIN_SYSTEM, MAIN_TOOLS, first))
        sub: list[Any] = [*first, {"role": "assistant", "content": hello}]
        for turn in range(3):
            sub.append({"role": "user", "content": f"extract {turn}"})
            text = await _send(http, _body(SUB_SYSTEM, SUB_TOOLS, sub))
            sub.append({"role": "assistant", "content": text})
    sessions = sessions_in(tmp_path)
    assert len(sessions) == 2
    (branch,) = [s for s in sessions.values() if s.info.parent is not None]
    assert len([e for e in branch.events if e.type == "turn/start"]) == 3
    assert not [e for e in branch.events if isinstance(e.surface_op, dict)]
    assert_rebuilds(sessions, emu)


async def test_a_side_call_of_the_same_client_run_joins_its_family(tmp_path: Path) -> None:
    """Claude Code names its run in every request (``x-claude-code-session-id``):
    a title call that shares no history with the main conversation is its own
    session, listed under the run's first one; another run's is not."""
    run = {"x-claude-code-session-id": "e9ca04c8-2fb8-4917-893d-c4d88c7f527d"}
    async with in_process(tmp_path) as (_, emu, http):
        main = [{"role": "user", "content": "Fix the bug"}]
        await _send(http, _body(MAIN_SYSTEM, MAIN_TOOLS, main), **run)
        title = [{"role": "user", "content": "Write a 5-word title for: Fix the bug."}]
        await _send(http, _body("You write titles.", [], title), **run)
        await _send(
            http,
            _body("You write titles.", [], title),
            **{**run, "x-claude-code-session-id": "other"},
        )
    sessions = sessions_in(tmp_path)
    assert len(sessions) == 3
    (first,) = [s for s in sessions.values() if _user_texts(s) == ["Fix the bug"]]
    side = [s for s in sessions.values() if s is not first]
    linked = [s for s in side if s.info.parent is not None]
    assert len(linked) == 1
    origin = _origin(linked[0])
    assert origin is not None
    assert origin["parent"] == first.id
    assert "parent_seq" not in origin
    assert origin["why"] == "the same client run (x-claude-code-session-id), no shared history"
    assert origin["client"] == {
        "signal": "x-claude-code-session-id",
        "id": run["x-claude-code-session-id"],
    }
    assert_rebuilds(sessions, emu)


def _user_texts(session: Session) -> list[str]:
    return [
        m["content"][0]["text"]
        for m in session.derive_messages()
        if m["role"] == "user" and m["content"]
    ]


async def test_an_agent_that_takes_its_conversation_back_after_a_handoff_continues_it(
    tmp_path: Path,
) -> None:
    """Agent A hands the conversation to agent B (its own prompt and tools), then
    takes it back: B's turn is a branch, and A's next request, which holds B's
    answer, continues A's own session (not a second branch off B's)."""
    async with in_process(tmp_path) as (_, emu, http):
        history: list[Any] = [{"role": "user", "content": "book a flight"}]
        history.append(
            {
                "role": "assistant",
                "content": await _send(http, _body(MAIN_SYSTEM, MAIN_TOOLS, history)),
            }
        )
        history.append({"role": "user", "content": "to Paris"})
        history.append(
            {
                "role": "assistant",
                "content": await _send(http, _body(SUB_SYSTEM, SUB_TOOLS, history)),
            }
        )
        history.append({"role": "user", "content": "thanks"})
        await _send(http, _body(MAIN_SYSTEM, MAIN_TOOLS, history))
    sessions = sessions_in(tmp_path)
    assert len(sessions) == 2
    (b,) = [s for s in sessions.values() if s.info.parent is not None]
    a = sessions[b.info.parent or ""]
    assert len([e for e in a.events if e.type == "turn/start"]) == 2
    assert [e.type for e in a.events if e.type.startswith("request/")] == ["request/header"]
    assert not [e for e in a.events if isinstance(e.surface_op, dict)]
    # B's answer is in A's log as a message the client sent
    sent = [e for e in a.events if e.type == "assistant/message"]
    assert [e.data["source"].get("kind") for e in sent] == [None, "client", None]
    assert_rebuilds(sessions, emu)
