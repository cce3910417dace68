"""Cache breaks in other people's agents are named from the log, precisely enough to fix them.

A client (an agent behind ``tapelog proxy``) edits its history, reorders and
adds tools, puts a clock into its system prompt, switches models and goes idle.
``tapelog cache --json`` must name each of those at the request where it
happened, with the detail that says what to fix, and never ``unexplained``;
the table, ``tapelog diff`` and the HTML report say it in sentences, with log
text escaped and bounded. Two ways in: the proxy's events written with the
public log API, and an agent on the emulator whose history a "client" rewrites
between turns (so the cache numbers are the emulator's own).
"""

from __future__ import annotations

import json
import re
from html import unescape
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agent._harness import LONG_SYSTEM, add, agent_on, assert_bytes_rebuild, shout
from tapelog.agent import tool
from tapelog.audit import CacheReport, cache_report, request_diff
from tapelog.cache._api import provider_cache
from tapelog.cli import cli
from tapelog.emulator import Emulator
from tapelog.log import decode, encode
from tapelog.log._api import Session
from tapelog.store import JsonlStore

from ._client_log import (
    COLD,
    ClientLog,
    assistant,
    call,
    client_resends,
    reasoning,
    result,
    text,
    tool_schema,
    user,
)

RULES = [f"Rule {i}: answer carefully and cite the tool output." for i in range(110)]


def system(clock: str) -> str:
    """A long system prompt (past OpenAI's 1,024-token minimum) with a clock on line 2."""
    return "\n".join(["You are a news agent.", f"Current time: {clock}", *RULES])


def _causes(report: CacheReport) -> dict[int, list[tuple[str, dict[str, Any]]]]:
    """Request index -> its causes as (kind, detail), for the requests that have any."""
    return {
        row.index: [(c.kind, dict(c.detail)) for c in row.causes]
        for row in report.requests
        if row.causes
    }


def _only(report: CacheReport, index: int) -> dict[str, Any]:
    [(kind, detail)] = _causes(report)[index]
    return {"kind": kind, **detail}


HOSTILE = "<script>alert(1)</script>\x1b[2J"


def _scripted_client() -> tuple[ClientLog, dict[str, int]]:
    """Every kind of break, one per request; returns the log and where each one is."""
    log = ClientLog("openai")
    tools = [tool_schema("search"), tool_schema("read")]
    opts: dict[str, Any] = {
        "model": "gpt-4.1-mini",
        "system": system("2024-05-01 09:00"),
        # Reasoning goes back to the provider, so dropping it changes the prompt.
        "wire": {"reasoning_send_back": "present"},
    }
    at: dict[str, int] = {}

    def send(messages: list[dict[str, Any]], answer: dict[str, Any], **kw: Any) -> int:
        return log.send(messages, tools=kw.pop("tools", tools), answer=answer, **{**opts, **kw})

    first = "What is new today? Sent at 2024-05-01 09:00:00."
    args = '{"query": "news", "limit": 5}'
    m = [user(first)]
    a1 = assistant(reasoning("I should search."), call("call_1", "search", args))
    send(m, a1)
    m += [a1, result("call_1", "Rain expected.")]
    a2 = assistant(text("Rain is expected."))
    send(m, a2)
    m += [a2, user("Thanks. My local time is 09:01.")]
    send(m, assistant(text("You're welcome.")))
    m += [assistant(text("You're welcome."))]

    # The client renders a clock into message 5.
    m[4] = user("Thanks. My local time is 09:02.")
    m += [user("Anything else?")]
    at["timestamp"] = send(m, assistant(text("No.")))
    m += [assistant(text("No."))]
    # ... re-serializes the tool call's arguments (message 2) ...
    reserialized = '{"limit":5,"query":"news"}'
    m[1] = assistant(reasoning("I should search."), call("call_1", "search", reserialized))
    m += [user("More?")]
    at["arguments"] = send(m, assistant(text("Nothing more.")))
    m += [assistant(text("Nothing more."))]
    # ... drops the reasoning it was sent (message 2) ...
    m[1] = assistant(call("call_1", "search", reserialized))
    m += [user("Sure?")]
    at["reasoning"] = send(m, assistant(text("Sure.")))
    m += [assistant(text("Sure."))]
    # ... edits the first message for real (with text that must not reach a page raw) ...
    m[0] = user(first.replace("today?", f"today? {HOSTILE}"))
    m += [user("Go on.")]
    at["edited"] = send(m, assistant(text("Done.")))
    m += [assistant(text("Done."))]
    # ... and drops message 5 altogether.
    del m[4]
    m += [user("Still there?")]
    at["removed"] = send(m, assistant(text("Yes.")))
    m += [assistant(text("Yes."))]
    # ... inserts a message at position 3.
    m.insert(2, user("(a note the client slipped in)"))
    m += [user("And now?")]
    at["inserted"] = send(m, assistant(text("Now.")))
    m += [assistant(text("Now."))]

    def turn(name: str, **kw: Any) -> None:
        m.append(user(f"Turn {name}."))
        at[name] = send(m, assistant(text("ok")), **kw)
        m.append(assistant(text("ok")))

    read, search = tool_schema("read"), tool_schema("search")
    fetch, grep = tool_schema("fetch"), tool_schema("grep")
    turn("reordered", tools=[read, search])
    turn("added-at-end", tools=[read, search, fetch])
    turn("added-between", tools=[read, grep, search, fetch])
    searcher = tool_schema("search", "Search the news of 2024-05-01.")
    turn("schema", tools=[read, grep, searcher, fetch])
    tools = [read, grep, searcher]
    turn("removed-tool")
    opts["system"] = system("2024-05-01 09:05")
    turn("system")
    opts.update(model="gpt-4.1", temperature=0.2, extras={"parallel_tool_calls": False})
    turn("model")
    # Sampling options are no part of the cached prompt: switching them alone breaks nothing.
    opts.update(max_tokens=512, temperature=0.7)
    turn("options")
    turn("idle", wait_ms=20 * 60 * 1000, usage=COLD)
    return log, at


@pytest.fixture(scope="module")
def scripted() -> tuple[ClientLog, dict[str, int], CacheReport]:
    log, at = _scripted_client()
    return log, at, cache_report(log.session)


def test_every_break_is_named_at_its_request_and_nothing_is_unexplained(
    scripted: tuple[ClientLog, dict[str, int], CacheReport],
) -> None:
    _, at, report = scripted
    causes = _causes(report)
    assert all(kind != "unexplained" for row in causes.values() for kind, _ in row)
    breaks = {name: i for name, i in at.items() if name != "options"}
    assert sorted(causes) == sorted(breaks.values())
    assert [r.drop for r in report.requests[:3]] == [False, False, False]
    assert all(report.requests[i - 1].drop for i in breaks.values())
    assert not report.requests[at["options"] - 1].drop


def test_edited_messages_say_which_message_and_what_changed(
    scripted: tuple[ClientLog, dict[str, int], CacheReport],
) -> None:
    log, at, report = scripted
    stamp = _only(report, at["timestamp"])
    assert stamp["kind"] == "client-edit"
    assert stamp["message"] == 5
    assert stamp["role"] == "user"
    assert (stamp["what"], stamp["field"]) == ("timestamp", "content[0].text")
    assert (stamp["old"], stamp["new"]) == ("09:01", "09:02")
    assert stamp["changed"] == 1
    replace = log.session.event(report.requests[at["timestamp"] - 1].causes[0].seqs[0])
    answered = [e.seq for e in log.session.events[: replace.seq] if e.type == "assistant/message"]
    # From the message the client changed to the end of the history it had sent.
    assert replace.surface_op == {"op": "replace", "start": stamp["seq"], "end": answered[-1]}
    assert stamp["by"] == replace.seq

    args = _only(report, at["arguments"])
    assert (args["message"], args["role"], args["what"]) == (
        2,
        "assistant",
        "arguments-reserialized",
    )
    assert (args["tool"], args["call_id"], args["field"]) == (
        "search",
        "call_1",
        "content[1].arguments",
    )
    assert "also" not in args

    dropped = _only(report, at["reasoning"])
    assert (dropped["message"], dropped["what"], dropped["blocks"]) == (2, "reasoning-dropped", 1)
    assert dropped["old"] == "I should search."

    edited = _only(report, at["edited"])
    assert (edited["message"], edited["what"], edited["field"]) == (
        1,
        "content-edited",
        "content[0].text",
    )
    assert "<script>alert(1)</script>\\x1b[2J" in edited["new"]
    assert "\x1b" not in edited["new"]
    assert len(edited["new"]) <= 80

    removed = _only(report, at["removed"])
    assert (removed["message"], removed["what"], removed["role"]) == (5, "removed", "user")
    assert removed["old"] == "Thanks. My local time is 09:02."
    inserted = _only(report, at["inserted"])
    assert (inserted["message"], inserted["what"]) == (3, "inserted")


def test_tool_changes_say_reordered_appended_inserted_changed_removed(
    scripted: tuple[ClientLog, dict[str, int], CacheReport],
) -> None:
    log, at, report = scripted
    reorder = _only(report, at["reordered"])
    assert reorder["kind"] == "header-fallback"  # the delta cannot express a reorder
    assert (
        log.session.event(report.requests[at["reordered"] - 1].causes[0].seqs[0]).data["reason"]
        == "fallback"
    )
    assert reorder["tools"]["reordered"] is True
    assert reorder["tools"]["moved"] == {"position": 1, "old": "search", "new": "read"}
    at_end = _only(report, at["added-at-end"])
    assert at_end["tools"]["added"] == ["fetch"]
    assert (at_end["tools"]["at_end"], at_end["tools"]["added_at"]) == (True, {"fetch": 3})
    between = _only(report, at["added-between"])
    assert (between["tools"]["at_end"], between["tools"]["added_at"]) == (False, {"grep": 2})
    schema = _only(report, at["schema"])
    assert schema["kind"] == "header-delta"
    assert schema["tools"]["changed"] == ["search"]
    assert schema["tools"]["changed_keys"] == {"search": ["description"]}
    gone = _only(report, at["removed-tool"])
    assert gone["tools"]["removed"] == ["fetch"]


def test_system_model_options_and_idle_are_named(
    scripted: tuple[ClientLog, dict[str, int], CacheReport],
) -> None:
    _, at, report = scripted
    sys_change = _only(report, at["system"])
    assert (sys_change["kind"], sys_change["fields"]) == ("header-delta", ["system"])
    assert sys_change["system_change"] == {
        "line": 2,
        "removed": 1,
        "added": 1,
        "what": "timestamp",
        "old": "2024-05-01 09:00",
        "new": "2024-05-01 09:05",
    }
    model = _only(report, at["model"])
    assert model["config"] == {
        "model": ["gpt-4.1-mini", "gpt-4.1"],
        "temperature": [None, 0.2],
        "extras.parallel_tool_calls": [None, False],
    }
    idle = _only(report, at["idle"])
    assert idle["kind"] == "idle-gap"
    assert idle["gap_ms"] == 20 * 60 * 1000
    assert idle["lifetime_ms"] == provider_cache("openai").idle_lifetime_ms
    row = report.requests[at["idle"] - 1]
    assert (row.cached_reported, row.cached_expected) == (0, 0)


SENTENCES = {
    "timestamp": "the client changed message 5 (user): a timestamp in content[0].text, "
    "“09:01” → “09:02”",
    "arguments": "the client changed message 2 (assistant): the arguments of tool call "
    "“search” (call_1) were re-serialized (same JSON value, other text: "
    '“{"query": "news", "limit": 5}” → “{"limit":5,"query":"news"}”)',
    "reasoning": "the client changed message 2 (assistant): dropped 1 reasoning block "
    "(content[0]: “I should search.”)",
    "removed": "the client removed message 5 (user) of the previous request",
    "inserted": "the client inserted message 3 (user): “(a note the client slipped in)”",
    "reordered": "tools reordered (position 1: “read” now stands where “search” was) "
    "(logged as a full header snapshot: no delta expresses it)",
    "added-at-end": "a tool was added at the end: “fetch”",
    "added-between": "tool “grep” added at position 2",
    "schema": "tool “search” schema changed (description)",
    "removed-tool": "tool “fetch” removed",
    "system": "system prompt line 2 changed: a timestamp, “2024-05-01 09:00” → “2024-05-01 09:05”",
    "model": 'model switched: "gpt-4.1-mini" → "gpt-4.1"; temperature set to 0.2; '
    "extras.parallel_tool_calls set to false",
    "idle": "idle for 20m before this request, longer than the openai cache keeps a prefix (5m)",
}


def test_each_cause_reads_as_a_sentence(
    scripted: tuple[ClientLog, dict[str, int], CacheReport],
) -> None:
    _, at, report = scripted
    for name, sentence in SENTENCES.items():
        [cause] = report.requests[at[name] - 1].causes
        assert sentence in cause.sentence, (name, cause.sentence)
    edited = report.requests[at["edited"] - 1].causes[0].sentence
    assert "content[0].text edited" in edited
    assert "\x1b" not in edited


def _cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), obj={"debug": False})
    return result.exit_code, result.stdout, result.stderr


def test_the_cli_json_table_diff_and_html_report_say_it(tmp_path: Path) -> None:
    log, at = _scripted_client()
    with JsonlStore(tmp_path).create(log.session):
        pass
    sid, store = log.session.id, str(tmp_path)
    code, out, _ = _cli("cache", sid, "--store", store, "--json")
    assert code == 0
    data = decode(out)
    assert data == decode(encode(cache_report(JsonlStore(tmp_path).load(sid).session).to_json()))
    kinds = [[c["kind"] for c in r["causes"]] for r in data["requests"]]
    assert "unexplained" not in {k for row in kinds for k in row}
    assert data["requests"][at["timestamp"] - 1]["causes"][0]["detail"]["what"] == "timestamp"

    code, out, _ = _cli("cache", sid, "--store", store)
    assert code == 0
    flat = " ".join(out.split())
    assert "drop: client edit: message 5 (timestamp)" in flat
    for name in ("timestamp", "reasoning", "added-at-end", "system", "idle"):
        assert " ".join(SENTENCES[name].split()) in flat, name
    assert f"#{at['edited']} (turn" in flat
    assert "\x1b" not in out
    assert "<script>alert(1)</script>\\x1b[2J" in flat

    code, out, _ = _cli(
        "diff", sid, str(at["reasoning"] - 1), str(at["reasoning"]), "--store", store
    )
    assert code == 0
    assert "sent differently by the client:" in out
    assert SENTENCES["reasoning"] in out
    code, out, _ = _cli("diff", sid, str(at["system"] - 1), str(at["system"]), "--store", store)
    assert code == 0
    assert "in short: " + SENTENCES["system"] in out
    code, out, _ = _cli(
        "diff", sid, str(at["system"] - 1), str(at["system"]), "--store", store, "--json"
    )
    assert decode(out)["header"]["system_change"]["what"] == "timestamp"

    page = tmp_path / "report.html"
    code, _, _ = _cli("report", sid, "--store", store, "-o", str(page))
    assert code == 0
    html = page.read_text(encoding="utf-8")
    body = re.sub(r"<style>.*?</style>", "", html, flags=re.S)
    assert "unexplained" not in body
    assert "<script>alert(1)" not in html
    breaks = html.split('<table class="breaks">', 1)[1].split("</table>", 1)[0]
    assert "\x1b" not in breaks
    why = [unescape(c) for c in re.findall(r'<td class="why">(.*?)</td>', breaks, flags=re.S)]
    said = " ".join(unescape(re.sub(r"<[^>]+>", " ", w)) for w in why)
    for name in ("timestamp", "arguments", "reordered", "added-at-end", "system", "model", "idle"):
        assert " ".join(SENTENCES[name].split()) in " ".join(said.split()), name
    assert "&lt;script&gt;alert(1)&lt;/script&gt;\\x1b[2J" in breaks


def test_the_diff_classifies_a_replaced_message() -> None:
    log, at = _scripted_client()
    diff = request_diff(log.session, at["arguments"] - 1, at["arguments"])
    [edit] = diff.messages.edits
    assert (edit.message, edit.what, edit.extra["tool"]) == (2, "arguments-reserialized", "search")
    assert [r.kind for r in diff.messages.replaced] == ["replace"]
    assert diff.to_json()["messages"]["edits"][0]["what"] == "arguments-reserialized"
    # Requests that only grew have no edits.
    assert request_diff(log.session, 1, 2).messages.edits == ()


# --- end to end: an agent on the emulator, its history rewritten by a "client" -------------


@tool
def stamp() -> str:
    """The current time."""
    return "09:00"


def _clocked(hhmm: str) -> str:
    return f"You are terse.\nBe careful.\nCurrent time: 2024-05-01 {hhmm}\n{LONG_SYSTEM}"


def _reserialize(data: Any) -> Any:
    for block in data["content"]:
        if block["type"] == "tool_call":
            value = json.loads(block["arguments"])
            block["arguments"] = json.dumps(value, separators=(",", ":"), sort_keys=True)
    return data


def _drop_reasoning(data: Any) -> Any:
    data["content"] = [b for b in data["content"] if b["type"] != "reasoning"]
    return data


def _retime(data: Any) -> Any:
    data["content"][0]["text"] = data["content"][0]["text"].replace("09:00", "09:03")
    return data


async def test_the_emulators_drops_are_attributed_end_to_end(tmp_path: Path) -> None:
    now = [1_714_554_000.0]  # seconds: the emulator's TTL and the log's clock share it
    emulator = Emulator(ttl_seconds=3600, clock=lambda: now[0])
    session = Session("e2e", clock=lambda: int(now[0] * 1000))
    emulator.push(
        {
            "reasoning": "Add them.",
            "tool_calls": [{"name": "add", "arguments": '{"a": 2, "b": 3}'}],
        },
        {"text": "5."},
    )
    store = JsonlStore(tmp_path)
    steps: dict[str, int] = {}
    with store.create(session) as writer:
        async with agent_on(
            emulator,
            provider="deepseek",
            session=session,
            system=_clocked("09:00"),
            tools=[add, shout],
            config={"wire": {"reasoning_send_back": "present"}},
            writer=writer,
        ) as agent:

            async def turn(name: str, prompt: str) -> None:
                now[0] += 30
                await agent.run(prompt)
                steps[name] = sum(1 for e in session.events if e.type == "step/start")

            await turn("first", "What is 2 + 3? Asked at 09:00.")
            await turn("second", "Thanks.")
            client_resends(session, {1: _retime})
            await turn("timestamp", "Again?")
            client_resends(session, {2: _reserialize})
            await turn("arguments", "Once more?")
            client_resends(session, {2: _drop_reasoning})
            await turn("reasoning", "Last one?")
            agent.tool_order = ["shout", "add"]
            await turn("reordered", "Reordered.")
            agent.add_tool(stamp)
            agent.tool_order = ["shout", "add", "stamp"]
            await turn("added-at-end", "A new tool.")
            agent.system = _clocked("09:05")
            await turn("system", "Later.")
            agent.config = agent.config.replace(model="deepseek-coder")
            await turn("model", "Another model.")
            now[0] += 2 * 3600
            await turn("idle", "Two hours later.")
    assert_bytes_rebuild(session, emulator)
    report = cache_report(store.load(session.id).session)
    rows = report.requests
    assert report.totals.efficiency == 1.0
    assert [r.cached_expected for r in rows] == [r.cached_reported for r in rows]
    assert all(c.kind != "unexplained" for r in rows for c in r.causes)
    named = {r.index: [c.kind for c in r.causes] for r in rows if r.causes}
    assert named == {
        steps["timestamp"]: ["client-edit"],
        steps["arguments"]: ["client-edit"],
        steps["reasoning"]: ["client-edit"],
        steps["reordered"]: ["header-fallback"],
        steps["added-at-end"]: ["header-delta"],
        steps["system"]: ["header-delta"],
        steps["model"]: ["header-delta"],
        steps["idle"]: ["idle-gap"],
    }
    # Each break cost real cache: the emulator reported less than the request before's prompt.
    for name in ("timestamp", "arguments", "reasoning", "reordered", "system", "idle"):
        row, before = rows[steps[name] - 1], rows[steps[name] - 2]
        assert row.drop
        assert row.cached_reported < before.prompt_tokens, name
    detail = {
        name: dict(rows[steps[name] - 1].causes[0].detail)
        for name in steps
        if name
        in ("timestamp", "arguments", "reasoning", "added-at-end", "system", "model", "idle")
    }
    assert (detail["timestamp"]["message"], detail["timestamp"]["what"]) == (1, "timestamp")
    assert (detail["timestamp"]["old"], detail["timestamp"]["new"]) == ("09:00", "09:03")
    assert (detail["arguments"]["message"], detail["arguments"]["what"]) == (
        2,
        "arguments-reserialized",
    )
    assert detail["arguments"]["tool"] == "add"
    assert (detail["reasoning"]["message"], detail["reasoning"]["what"]) == (2, "reasoning-dropped")
    assert detail["added-at-end"]["tools"]["added"] == ["stamp"]
    assert detail["added-at-end"]["tools"]["at_end"] is True
    assert detail["system"]["system_change"]["line"] == 3
    assert detail["system"]["system_change"]["what"] == "timestamp"
    assert detail["model"]["config"] == {"model": ["deepseek-chat", "deepseek-coder"]}
    assert detail["idle"]["gap_ms"] > provider_cache("deepseek").idle_lifetime_ms  # type: ignore[operator]


# --- through the real proxy: its own log, attributed -----------------------------------------


def _function(name: str) -> dict[str, Any]:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    return {
        "type": "function",
        "function": {"name": name, "description": name, "parameters": schema},
    }


async def test_a_session_the_proxy_logged_is_attributed(tmp_path: Path) -> None:
    """An OpenAI-style client through ``tapelog proxy`` to the emulator: the proxy's
    replaces and header events name each break (message N is the client's ``messages[N]``:
    its first message is the system prompt, which the log keeps in the header)."""
    # Imported here so the log-only tests above do not depend on the web stack.
    import httpx

    from tapelog.proxy import Proxy, Upstream

    emulator = Emulator(
        script=[
            {"tool_calls": [{"name": "add", "arguments": '{"a": 1, "b": 2}'}]},
            *({"text": f"ok {i}"} for i in range(10)),
        ]
    )
    store = JsonlStore(tmp_path)
    upstream = Upstream.resolve("openai", base_url="http://emulator/openai/v1")
    async with httpx.AsyncClient(transport=emulator.transport(), timeout=30) as to_upstream:
        proxy = Proxy(upstream, store, http_client=to_upstream)
        transport = httpx.ASGITransport(app=proxy.app)
        async with httpx.AsyncClient(
            transport=transport,
            base_url="http://127.0.0.1/s/agent/v1",
            headers={"Authorization": "Bearer sk-client-key-for-the-test-0000"},
            timeout=30,
        ) as client:
            messages: list[dict[str, Any]] = [{"role": "user", "content": "Add 1 and 2 (09:00)."}]
            state: dict[str, Any] = {"clock": "09:00", "model": "gpt-4.1-mini"}
            state["tools"] = [_function("add"), _function("mul")]

            async def send(prompt: str | None = None) -> None:
                if prompt is not None:
                    messages.append({"role": "user", "content": prompt})
                system = f"You are terse.\nNow: 2024-05-01 {state['clock']}\n{LONG_SYSTEM}"
                body = {
                    "model": state["model"],
                    "messages": [{"role": "system", "content": system}, *messages],
                    "tools": state["tools"],
                }
                answer = await client.post("/chat/completions", json=body)
                assert answer.status_code == 200, answer.text
                reply = answer.json()["choices"][0]["message"]
                messages.append(
                    {k: v for k, v in reply.items() if k in ("role", "content", "tool_calls")}
                )

            await send()
            call_id = messages[1]["tool_calls"][0]["id"]
            messages.append({"role": "tool", "tool_call_id": call_id, "content": "3"})
            await send()
            messages[0]["content"] = "Add 1 and 2 (09:01)."
            await send("Again.")
            arguments = messages[1]["tool_calls"][0]["function"]
            arguments["arguments"] = '{"b":2,"a":1}'
            await send("Once more.")
            state["tools"] = [_function("mul"), _function("add")]
            await send("Reordered.")
            state["tools"] = [*state["tools"], _function("div")]
            await send("A tool more.")
            state["clock"] = "09:05"
            await send("Later.")
            state["model"] = "gpt-4.1"
            await send("Bigger.")
        await proxy.aclose()
    report = cache_report(store.load("agent").session)
    named = [
        (r.index, [(c.kind, c.sentence) for c in r.causes]) for r in report.requests if r.causes
    ]
    assert all(kind != "unexplained" for _, causes in named for kind, _ in causes)
    assert [(i, [k for k, _ in causes]) for i, causes in named] == [
        (3, ["client-edit"]),
        (4, ["client-edit"]),
        (5, ["header-fallback"]),
        (6, ["header-fallback"]),
        (7, ["header-delta"]),
        (8, ["header-delta"]),
    ]
    said = [causes[0][1] for _, causes in named]
    assert said[0].startswith("the client changed message 1 (user): a timestamp in content[0].text")
    assert said[1].startswith(
        "the client changed message 2 (assistant): the arguments of tool call “add”"
    )
    assert said[2].startswith("tools reordered (position 1: “mul” now stands where “add” was)")
    assert said[3].startswith("a tool was added at the end: “div”")
    assert (
        said[4]
        == "system prompt line 2 changed: a timestamp, “2024-05-01 09:00” → “2024-05-01 09:05”"
    )
    assert said[5] == 'model switched: "gpt-4.1-mini" → "gpt-4.1"'
    assert all(r.cached_reported == r.cached_expected for r in report.requests)
