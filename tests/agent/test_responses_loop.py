"""The loop on the Responses API, end to end over real HTTP (a scripted endpoint on
127.0.0.1 that speaks the real event stream): tool calls, encrypted reasoning
round trips, structured output in ``text.format``, byte-exact rebuilds."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pydantic
import pytest
from click.testing import CliRunner

from _loopback import serve_loopback
from agent._harness import SECRET, add
from agent._responses_server import ResponsesServer
from tapelog.agent import Agent, CompactionPolicy, OutputSpec, RetryPolicy
from tapelog.audit import cache_report, encode_request, rebuild_requests
from tapelog.audit._segments import SegmentRenderer
from tapelog.cache._api import chain_segments, prefix_root, responses_sources
from tapelog.cli import cli
from tapelog.llm import make_client
from tapelog.log import decode
from tapelog.log._api import LlmCallConfig, Session
from tapelog.request import walk_requests
from tapelog.store import JsonlStore

RESPONSES = {"api": "responses"}


def reasoning(n: int, *summary: str) -> dict[str, Any]:
    parts = [{"type": "summary_text", "text": s} for s in summary]
    return {"id": f"rs_{n}", "type": "reasoning", "summary": parts}


def said(n: int, text: str) -> dict[str, Any]:
    part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
    return {
        "id": f"msg_{n}",
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [part],
    }


def calls(n: int, name: str, arguments: str) -> dict[str, Any]:
    return {
        "id": f"fc_{n}",
        "type": "function_call",
        "status": "completed",
        "arguments": arguments,
        "call_id": f"call_{n}",
        "name": name,
    }


@asynccontextmanager
async def agent_over_http(
    server: ResponsesServer,
    session: Session,
    writer: Any = None,
    tools: Sequence[Any] = (add,),
    agent: Mapping[str, Any] | None = None,
    **config: Any,
) -> AsyncIterator[Agent]:
    cfg = LlmCallConfig(provider="openai", model="gpt-5-mini", wire=RESPONSES, **config)
    with serve_loopback(server.app) as port:
        async with httpx.AsyncClient(timeout=30) as http:
            client = make_client(
                cfg,
                base_url=f"http://127.0.0.1:{port}/v1",
                http_client=http,
                env={"OPENAI_API_KEY": SECRET},
            )
            yield Agent(
                session,
                client,
                config=cfg,
                system="You are terse.",
                tools=tools,
                retry=RetryPolicy(base_delay=0.0),
                writer=writer,
                **(agent or {}),
            )


def assert_rebuilds(session: Session, received: Sequence[bytes]) -> None:
    rebuilt = [encode_request(r.request) for r in rebuild_requests(session.events)]
    assert rebuilt == list(received)


async def _tool_session(
    store: Path | None = None, **extras: Any
) -> tuple[ResponsesServer, Session, list[str]]:
    """Two turns: reasoning + a tool call, its answer, then reasoning + a reply
    (written to a JSONL ``store`` when one is given)."""
    server = ResponsesServer(
        [
            [reasoning(1, "Add them.", "Use the tool."), calls(1, "add", '{"a": 2, "b": 3}')],
            [said(2, "5.")],
            [reasoning(3, "Easy."), said(4, "ok")],
        ]
    )
    session = Session()
    with contextlib.ExitStack() as stack:
        options: dict[str, Any] = {}
        if store is not None:
            options["writer"] = stack.enter_context(JsonlStore(store).create(session))
        async with agent_over_http(
            server, session, reasoning_effort="low", extras=extras, **options
        ) as agent:
            first = await agent.run("What is 2 + 3?")
            second = await agent.run("Thanks.")
    return server, session, [first.text, second.text]


async def test_tool_turns_send_encrypted_reasoning_back_byte_for_byte() -> None:
    server, session, texts = await _tool_session()
    assert texts == ["5.", "ok"]
    bodies = [decode(b) for b in server.received]
    assert len(bodies) == 3
    assert all(b["store"] is False and b["stream"] is True for b in bodies)
    assert bodies[0]["include"] == ["reasoning.encrypted_content"]
    assert bodies[0]["reasoning"] == {"effort": "low"}
    assert bodies[0]["tools"][0]["type"] == "function"
    # Request 2 sends the whole input: the reasoning item exactly as issued, the
    # call, its output.
    second_input = bodies[1]["input"]
    assert [i["type"] for i in second_input] == [
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
    ]
    assert second_input[1]["encrypted_content"] == server.issued["rs_1"]
    assert second_input[1]["summary"][1]["text"] == "Use the tool."
    assert second_input[3] == {"type": "function_call_output", "call_id": "call_1", "output": "5"}
    # The third request still carries turn 1's reasoning, unaltered, after its own history.
    third_input = bodies[2]["input"]
    assert third_input[: len(second_input)] == second_input
    assert [i.get("type") for i in third_input[len(second_input) :]] == ["message", "message"]
    assert_rebuilds(session, server.received)
    logged = [e for e in session.events if e.type == "assistant/message"]
    assert logged[0].data["content"][0]["encrypted_content"] == server.issued["rs_1"]
    assert logged[0].data["usage"]["reasoning"] == 3
    assert SECRET.encode() not in b"".join(server.received)
    report = cache_report(session)
    assert all(c.kind != "unexplained" for row in report.requests for c in row.causes)


class Weather(pydantic.BaseModel):
    city: str
    degrees: int


async def test_structured_output_is_asked_for_in_text_format() -> None:
    server = ResponsesServer([[said(1, '{"city": "Oslo", "degrees": 4}')]])
    session = Session()
    async with agent_over_http(server, session) as agent:
        result = await agent.run("Weather in Oslo?", output_type=Weather)
    assert result.output == Weather(city="Oslo", degrees=4)
    body = decode(server.received[0])
    fmt = body["text"]["format"]
    assert fmt["type"] == "json_schema"
    assert fmt["name"] == "Weather"
    assert fmt["schema"]["properties"]["degrees"]["type"] == "integer"
    assert "response_format" not in body
    assert_rebuilds(session, server.received)


@pytest.mark.parametrize(
    ("tools", "choice"),
    [((), {"type": "function", "name": "final_result"}), ((add,), "required")],
)
async def test_tool_mode_asks_for_the_output_tool_the_responses_way(
    tools: tuple[Any, ...], choice: Any
) -> None:
    server = ResponsesServer([[calls(1, "final_result", '{"city": "Oslo", "degrees": 4}')]])
    session = Session()
    async with agent_over_http(server, session, tools=tools) as agent:
        result = await agent.run("Weather?", output_type=OutputSpec(Weather, mode="tool"))
    assert result.output == Weather(city="Oslo", degrees=4)
    body = decode(server.received[0])
    assert body["tool_choice"] == choice
    assert {t["name"] for t in body["tools"]} == {"final_result", *(t.name for t in tools)}
    assert all(t["type"] == "function" for t in body["tools"])
    assert_rebuilds(session, server.received)


async def test_an_altered_reasoning_item_gets_the_apis_400() -> None:
    """The endpoint really checks what comes back: a log whose reasoning changed
    is refused, so the byte-for-byte round trip above is what made it pass."""
    server = ResponsesServer([[reasoning(1, "x"), said(2, "hi")], [said(3, "again")]])
    session = Session()
    async with agent_over_http(server, session) as agent:
        await agent.run("hi")
        server.issued["rs_1"] = "gAAAAB-something-else"
        result = await agent.run("again")
    assert result.reason["kind"] == "error"
    assert "could not be verified" in result.reason["error"]["message"]


async def test_the_audit_renders_each_request_as_the_full_body_renders() -> None:
    _, session, _ = await _tool_session(prompt_cache_key="session-1")
    renderer = SegmentRenderer()
    rebuilt = rebuild_requests(session.events)
    for item, step in zip(rebuilt, walk_requests(session.events), strict=True):
        rule, prompt = renderer.render(
            step.header, step.nodes, appended_only=not step.replaced_since
        )
        assert rule == "openai"
        body = decode(encode_request(item.request))
        root = prefix_root(rule, body["model"], body.get("prompt_cache_key"))
        full = chain_segments(root, responses_sources(body))
        assert [s.key for s in prompt.segments] == [s.key for s in full], item.index
        assert list(prompt.ends) == [sum(s.tokens for s in full[: i + 1]) for i in range(len(full))]
    assert len(rebuilt) == 3


async def test_the_cli_rebuilds_verifies_and_audits_a_stored_responses_log(tmp_path: Path) -> None:
    server, session, _ = await _tool_session(tmp_path, prompt_cache_key="s-1")

    def run(*args: str) -> str:
        result = CliRunner().invoke(cli, [*args, "--store", str(tmp_path)], obj={"debug": False})
        assert result.exit_code == 0, result.output
        return result.output

    out = tmp_path / "bodies"
    run("requests", session.id, "--out", str(out))
    assert [f.read_bytes() for f in sorted(out.iterdir())] == server.received
    run("verify", session.id)
    audit = decode(run("cache", session.id, "--json"))
    assert [row["rule"] for row in audit["requests"]] == ["openai"] * 3
    chat = decode(run("requests", session.id, "--wire", "openai", "--json"))
    assert len(chat) == 3
    report = tmp_path / "report.html"
    run("report", session.id, "-o", str(report))
    assert "gpt-5-mini" in report.read_text(encoding="utf-8")


async def test_compaction_summarises_over_the_responses_wire_and_every_call_rebuilds() -> None:
    """The one-shot summary call goes through the same wire and client; the
    reasoning items it replays are checked like any other."""
    server = ResponsesServer(
        [
            [reasoning(1, "one"), said(2, "one")],
            [said(3, "two")],
            [reasoning(4, "three"), said(5, "three")],
            [said(6, "The user counted to three.")],
            [said(7, "four")],
        ]
    )
    session = Session()
    policy = CompactionPolicy(keep_messages=2)
    async with agent_over_http(server, session, agent={"compaction": policy}) as agent:
        for prompt in ("first?", "second?", "third?"):
            await agent.run(prompt)
        compacted = await agent.compact()
        assert compacted.ok, compacted.error
        await agent.run("fourth?")
    rebuilt = [encode_request(r.request) for r in rebuild_requests(session, one_shots=True)]
    assert rebuilt == server.received
    last = decode(server.received[-1])["input"]
    assert "The user counted to three." in last[0]["content"][0]["text"]
    # The kept messages still carry turn 3's reasoning item, unaltered.
    assert any(i.get("id") == "rs_4" for i in last)
