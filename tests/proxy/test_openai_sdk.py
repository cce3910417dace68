"""The official ``openai`` SDK through the proxy to the emulator, over real sockets.

The test plays the agent: it sends tools, runs the tool calls the model asks
for, sends the results back, and asks a follow-up. Through the proxy it must
see exactly what it sees talking to the emulator directly, and the emulator
must have received exactly the requests the stored log rebuilds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from openai import AsyncOpenAI, OpenAI

from tapelog.emulator import Emulator
from tapelog.log import decode

from ._helpers import (
    SCRIPT,
    SECRET,
    TOOLS_OPENAI,
    assert_no_secret,
    assert_rebuilds,
    direct_and_proxied,
    proxy_on,
    serve,
    sessions_in,
    types_of,
    upstream_for,
)

MODEL = "deepseek-chat"


def _ask(client: OpenAI, messages: list[Any], *, stream: bool) -> dict[str, Any]:
    """One request; what the SDK gave back, and the message an agent sends back."""
    if not stream:
        response = client.chat.completions.create(
            model=MODEL, messages=messages, tools=TOOLS_OPENAI, temperature=0
        )
        message = response.choices[0].message
        calls = [
            {"id": c.id, "name": c.function.name, "arguments": c.function.arguments}
            for c in message.tool_calls or []
        ]
        usage = response.usage.model_dump() if response.usage else None
        return {
            "id": response.id,
            "text": message.content,
            "calls": calls,
            "usage": usage,
            "finish": response.choices[0].finish_reason,
            "message": _echo(message.content, calls),
        }
    chunks = client.chat.completions.create(
        model=MODEL,
        messages=messages,
        tools=TOOLS_OPENAI,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    text: list[str] = []
    parts: dict[int, dict[str, Any]] = {}
    usage = finish = ident = None
    for chunk in chunks:
        ident = chunk.id
        if chunk.usage is not None:
            usage = chunk.usage.model_dump()
        for choice in chunk.choices:
            text.append(choice.delta.content or "")
            for piece in choice.delta.tool_calls or []:
                call = parts.setdefault(piece.index, {"id": "", "name": "", "arguments": ""})
                call["id"] = piece.id or call["id"]
                if piece.function is not None:
                    call["name"] = piece.function.name or call["name"]
                    call["arguments"] += piece.function.arguments or ""
            finish = choice.finish_reason or finish
    calls = [parts[i] for i in sorted(parts)]
    return {
        "id": ident,
        "text": "".join(text) or None,
        "calls": calls,
        "usage": usage,
        "finish": finish,
        "message": _echo("".join(text) or None, calls),
    }


def _echo(content: str | None, calls: list[dict[str, Any]]) -> dict[str, Any]:
    """The assistant message an agent sends back: the answer as it came (the
    emulator estimates tokens from the bytes it gets, ``"content": null`` included,
    so the direct run and the proxied one must send the same fields)."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": c["arguments"]},
            }
            for c in calls
        ]
    return message


def play(
    client: OpenAI, *, stream: bool, turns: int = 2, start: list[Any] | None = None
) -> list[Any]:
    """Run the scripted conversation as an agent would; every answer the SDK gave."""
    messages = (
        start
        if start is not None
        else [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "What is 1 + 2?"},
        ]
    )
    answers: list[Any] = []
    for turn in range(turns):
        while True:
            answer = _ask(client, messages, stream=stream)
            answers.append(answer)
            messages.append(answer["message"])
            if not answer["calls"]:
                break
            for call in answer["calls"]:
                args = decode(call["arguments"])
                result = str(args["a"] + args["b"])
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
        if turn + 1 < turns:
            messages.append({"role": "user", "content": "And 3 + 4?"})
    return answers


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_sync_client_sees_what_it_sees_directly_and_the_log_rebuilds(
    tmp_path: Path, stream: bool
) -> None:
    run = direct_and_proxied(
        tmp_path,
        SCRIPT,
        "deepseek",
        ("/deepseek", "/v1"),
        lambda url: OpenAI(base_url=url, api_key=SECRET),
        lambda client: play(client, stream=stream),
    )
    expected, got, upstream, lines = run.expected, run.got, run.upstream, run.lines
    assert got == expected
    assert [a["finish"] for a in got] == ["tool_calls", "stop", "tool_calls", "stop"]
    sessions = sessions_in(tmp_path)
    assert len(sessions) == 1, "one conversation, one session"
    (session,) = sessions.values()
    assert_rebuilds(sessions, upstream)
    assert len(upstream.received) == 4
    # One turn per request; the tool results open the next turn, before its step.
    assert types_of(session).count("turn/start") == 4
    assert types_of(session)[:4] == ["turn/start", "user/message", "step/start", "request/header"]
    assert_no_secret(tmp_path, *lines)
    assert len(lines) == 4
    assert all(line.startswith(session.id) for line in lines)


async def test_async_client_through_the_proxy(tmp_path: Path) -> None:
    upstream = Emulator(script=SCRIPT[:2])
    with serve(upstream.app) as port, proxy_on(tmp_path, upstream_for("deepseek", port)) as pp:
        client = AsyncOpenAI(base_url=f"http://127.0.0.1:{pp}/v1", api_key=SECRET)
        messages: list[Any] = [{"role": "user", "content": "What is 1 + 2?"}]
        first = await client.chat.completions.create(
            model=MODEL, messages=messages, tools=TOOLS_OPENAI
        )
        call = first.choices[0].message.tool_calls[0]
        messages.append(first.choices[0].message.model_dump(exclude_none=True))
        messages.append({"role": "tool", "tool_call_id": call.id, "content": "3"})
        stream = await client.chat.completions.create(
            model=MODEL, messages=messages, tools=TOOLS_OPENAI, stream=True
        )
        text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
        await client.close()
    assert call.function.arguments == '{"a": 1, "b": 2}'
    assert text == "1 + 2 = 3"
    sessions = sessions_in(tmp_path)
    assert len(sessions) == 1
    assert_rebuilds(sessions, upstream)
    assert_no_secret(tmp_path)


def test_a_restarted_proxy_continues_the_same_session(tmp_path: Path) -> None:
    upstream = Emulator(script=SCRIPT)
    messages: list[Any] = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "What is 1 + 2?"},
    ]
    lines: list[str] = []
    with serve(upstream.app) as port:
        with (
            proxy_on(tmp_path, upstream_for("deepseek", port), lines) as pp,
            OpenAI(base_url=f"http://127.0.0.1:{pp}/v1", api_key=SECRET) as client,
        ):
            before = play(client, stream=False, turns=1, start=messages)
        # A new proxy process: it finds the conversation in the store.
        with proxy_on(tmp_path, upstream_for("deepseek", port), lines) as pp:
            messages.append({"role": "user", "content": "And 3 + 4?"})
            with OpenAI(base_url=f"http://127.0.0.1:{pp}/v1", api_key=SECRET) as client:
                after = play(client, stream=True, turns=1, start=messages)
    assert [a["text"] for a in before + after] == [None, "1 + 2 = 3", None, "3 + 4 = 7"]
    sessions = sessions_in(tmp_path)
    assert len(sessions) == 1, lines
    (session,) = sessions.values()
    snapshots = [e.data["reason"] for e in session.events if e.type == "request/header"]
    assert snapshots == ["initial", "resume"]
    assert not any(isinstance(e.surface_op, dict) for e in session.events), "no replace"
    assert_rebuilds(sessions, upstream)
    # The emulator's cache outlived the proxy: the resumed request read the prefix.
    assert upstream.received[2].usage is not None
    assert upstream.received[2].usage["prompt_cache_hit_tokens"] > 0
    assert_no_secret(tmp_path, *lines)
