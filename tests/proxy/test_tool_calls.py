"""Tool calls the proxy hands to its client are logged like the loop's.

A proxied turn that ends with tool calls (``turn/end {"kind": "tool_calls"}``)
logs one ``tool/call`` per call, in the model's order, before its ``step/end``;
the results come with the client's next request, as ``tool/result`` events of
the next turn before its ``step/start``. The official SDKs play the agent; the
log must verify, rebuild every body the upstream got, and export an
``execute_tool`` span per call. Proxy steps are numbered from 1, like the loop's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from anthropic import Anthropic
from openai import OpenAI

from tapelog.audit._api import Timeline
from tapelog.emulator import Emulator
from tapelog.log import decode
from tapelog.log._api import Event, Session

from . import test_anthropic_sdk, test_openai_sdk
from ._helpers import (
    SCRIPT,
    SECRET,
    assert_rebuilds,
    direct_and_proxied,
    in_process,
    post,
    sessions_in,
)

TAPELOG = str(Path(sys.executable).with_name("tapelog"))


def _proxied(tmp_path: Path, provider: str, stream: bool) -> tuple[Session, Any]:
    store = tmp_path / "store"
    store.mkdir()
    if provider == "openai":
        run = direct_and_proxied(
            store,
            SCRIPT,
            "deepseek",
            ("/deepseek", "/v1"),
            lambda url: OpenAI(base_url=url, api_key=SECRET),
            lambda client: test_openai_sdk.play(client, stream=stream),
        )
    else:
        run = direct_and_proxied(
            store,
            SCRIPT,
            "anthropic",
            ("/anthropic", ""),
            lambda url: Anthropic(base_url=url, api_key=SECRET),
            lambda client: test_anthropic_sdk.play(client, stream=stream),
        )
    assert run.got == run.expected
    sessions = sessions_in(store)  # each verified first
    assert_rebuilds(sessions, run.upstream)
    (session,) = sessions.values()
    return session, run


def _of_turn(events: list[Event], turn: int) -> list[Event]:
    start = next(e.seq for e in events if e.type == "turn/start" and e.data["turn"] == turn)
    end = next(e.seq for e in events[start:] if e.type == "turn/end")
    return events[start : end + 1]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_proxied_tool_turn_logs_its_calls_and_their_results_come_next_turn(
    tmp_path: Path, provider: str, stream: bool
) -> None:
    session, _ = _proxied(tmp_path, provider, stream)
    events = list(session.events)
    calls = [e for e in events if e.type == "tool/call"]
    assert [e.data["name"] for e in calls] == ["add", "add"]
    ends = {e.data["turn"]: e.data["reason"]["kind"] for e in events if e.type == "turn/end"}
    assert ends == {1: "tool_calls", 2: "completed", 3: "tool_calls", 4: "completed"}
    for call in calls:
        turn = _of_turn(events, call.data["turn"])
        kinds = [e.type for e in turn if e.type not in ("assistant/chunk", "log/digest")]
        assert kinds[-4:] == ["assistant/message", "tool/call", "step/end", "turn/end"]
        assert turn[-1].data["reason"] == {"kind": "tool_calls"}
        # Same payload as the loop's: the call exactly as the model made it.
        message = next(e for e in reversed(turn) if e.type == "assistant/message")
        (block,) = [b for b in message.data["content"] if b["type"] == "tool_call"]
        assert set(call.data) == {"turn", "step", "call_id", "name", "arguments"}
        assert (call.data["call_id"], call.data["name"], call.data["arguments"]) == (
            block["id"],
            block["name"],
            block["arguments"],
        )
        assert (call.data["turn"], call.data["step"]) == (
            message.data["turn"],
            message.data["step"],
        )
        # Its result opens the next turn, before that turn's request.
        following = _of_turn(events, call.data["turn"] + 1)
        boundary = next(e.seq for e in following if e.type == "step/start")
        (result,) = [
            e
            for e in following
            if e.type == "tool/result" and e.data["call_id"] == call.data["call_id"]
        ]
        assert result.seq < boundary
        assert not result.data["is_error"]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_proxy_steps_are_numbered_from_1_like_the_loops(tmp_path: Path, provider: str) -> None:
    session, _ = _proxied(tmp_path, provider, stream=False)
    steps = {
        e.data["step"]
        for e in session.events
        if e.type not in ("request/header", "request/header-delta", "log/digest")
        and "step" in e.data
    }
    assert steps == {1}


def _tapelog(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TAPELOG_", "OTEL_"))}
    config_home = tmp_path / "config-home"
    config_home.mkdir(exist_ok=True)
    env["XDG_CONFIG_HOME"] = str(config_home)
    return subprocess.run(
        [TAPELOG, *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_the_otel_export_has_a_tool_span_per_proxied_call(tmp_path: Path, provider: str) -> None:
    session, _ = _proxied(tmp_path, provider, stream=True)
    out = tmp_path / "trace.jsonl"
    store = str(tmp_path / "store")
    done = _tapelog(tmp_path, "export", "otel", session.id, "--file", str(out), "--store", store)
    assert done.returncode == 0, done.stderr
    assert "4 turn(s), 4 model call(s), 2 tool call(s)" in done.stdout
    spans = [
        span
        for line in out.read_bytes().splitlines()
        for rs in decode(line)["resourceSpans"]
        for ss in rs["scopeSpans"]
        for span in ss["spans"]
    ]
    tools = [s for s in spans if s["name"] == "execute_tool add"]
    assert len(tools) == 2
    by_id = {s["spanId"]: s for s in spans}
    calls = [e for e in session.events if e.type == "tool/call"]
    for span, call in zip(
        sorted(tools, key=lambda s: int(s["startTimeUnixNano"])), calls, strict=True
    ):
        attrs = {a["key"]: a["value"] for a in span["attributes"]}
        assert attrs["gen_ai.tool.call.id"] == {"stringValue": call.data["call_id"]}
        assert by_id[span["parentSpanId"]]["name"].startswith("chat ")  # the step that asked
        # The span runs until the result the client sent with its next request.
        result = next(
            e
            for e in session.events
            if e.type == "tool/result" and e.data["call_id"] == call.data["call_id"]
        )
        assert attrs["tapelog.end_seq"] == {"intValue": str(result.seq)}
        assert "tapelog.open" not in attrs


@pytest.mark.parametrize("restart", [False, True], ids=["same-proxy", "restarted"])
async def test_a_call_the_client_drops_is_answered_as_unanswered_naming_its_call(
    tmp_path: Path, restart: bool
) -> None:
    script = [
        {"tool_calls": [{"name": "add", "arguments": '{"a": 1, "b": 2}'}]},
        {"text": "3"},
    ]
    emulator = Emulator(script=script)
    messages: list[Any] = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "1 + 2?"},
    ]
    body = {"model": "deepseek-chat", "messages": messages}
    async with in_process(tmp_path, emulator=emulator) as (_, _, http):
        first = await post(http, "/v1/chat/completions", body)
        call = first.json()["choices"][0]["message"]["tool_calls"][0]
        # The client writes the arguments back its own way: the model's call is
        # dropped (replaced by the client's), and with it the logged tool/call.
        call["function"]["arguments"] = '{"a":1,"b":2}'
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": "3"})
        if not restart:
            second = await post(http, "/v1/chat/completions", body)
    if restart:
        async with in_process(tmp_path, emulator=emulator) as (_, _, http):
            second = await post(http, "/v1/chat/completions", body)
    assert second.status_code == 200
    sessions = sessions_in(tmp_path)
    (session,) = sessions.values()
    assert_rebuilds(sessions, emulator)
    (logged,) = [e for e in session.events if e.type == "tool/call"]
    answers = [
        e
        for e in session.events
        if e.type == "tool/result" and e.data["call_id"] == logged.data["call_id"]
    ]
    unanswered, client = answers
    assert unanswered.data["error"] == {"kind": "unanswered"}
    assert list(unanswered.source_seqs or ()) == [logged.seq]
    assert (unanswered.data["turn"], unanswered.data["step"]) == (2, 1)
    assert not client.data["is_error"], "the client's own result, after its replace"


def test_the_report_timeline_names_the_tool_of_each_proxied_result(tmp_path: Path) -> None:
    session, _ = _proxied(tmp_path, "openai", stream=False)
    timeline = Timeline(lambda seq: None)
    for event in session.events:
        timeline.feed(event)
    page = timeline.html()
    results = [e for e in session.events if e.type == "tool/result"]
    for result in results:
        # The result line is tagged with the tool's name (from its tool/call),
        # not the bare call id it would fall back to without one.
        assert f'id="seq-{result.seq}"><span class="tag">add</span>' in page
        assert result.data["call_id"] not in page.split(f'id="seq-{result.seq}"')[1][:60]
    assert page.count('class="reason reason-tool_calls"') == 2
