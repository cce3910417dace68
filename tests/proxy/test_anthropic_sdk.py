"""The official ``anthropic`` SDK through the proxy to the emulator, over real sockets.

As with the OpenAI SDK: the test is the agent (tools, tool results, a
follow-up), and what it sees through the proxy equals what it sees directly.
The proxy's Anthropic wire places its own cache breakpoints, which the
emulator strips before estimating tokens, and these prompts are below the
1,024-token minimum, so the usage the client sees is the same too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from anthropic import Anthropic, AsyncAnthropic

from tapelog.emulator import Emulator
from tapelog.log import decode

from ._helpers import (
    SCRIPT,
    SECRET,
    TOOLS_ANTHROPIC,
    assert_no_secret,
    assert_rebuilds,
    direct_and_proxied,
    proxy_on,
    serve,
    sessions_in,
    types_of,
    upstream_for,
)

MODEL = "claude-sonnet-4-5"
SYSTEM = "You are terse."


def _ask(client: Anthropic, messages: list[Any], *, stream: bool) -> dict[str, Any]:
    options: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 256,
        "system": SYSTEM,
        "messages": messages,
        "tools": TOOLS_ANTHROPIC,
    }
    if stream:
        with client.messages.stream(**options) as events:
            texts = [text for text in events.text_stream]
            final = events.get_final_message()
        assert "".join(texts) == "".join(b.text for b in final.content if b.type == "text")
    else:
        final = client.messages.create(**options)
    content = [block.model_dump(exclude_none=True) for block in final.content]
    for block in content:
        block.pop("parsed_output", None)  # the stream helper's own field
    return {
        "id": final.id,
        "content": content,
        "usage": final.usage.model_dump(),
        "stop": final.stop_reason,
    }


def play(client: Anthropic, *, stream: bool) -> list[Any]:
    messages: list[Any] = [{"role": "user", "content": "What is 1 + 2?"}]
    answers: list[Any] = []
    for follow_up in ("And 3 + 4?", None):
        while True:
            answer = _ask(client, messages, stream=stream)
            answers.append(answer)
            messages.append({"role": "assistant", "content": answer["content"]})
            calls = [b for b in answer["content"] if b["type"] == "tool_use"]
            if not calls:
                break
            results = [
                {
                    "type": "tool_result",
                    "tool_use_id": call["id"],
                    "content": str(call["input"]["a"] + call["input"]["b"]),
                }
                for call in calls
            ]
            messages.append({"role": "user", "content": results})
        if follow_up is not None:
            messages.append({"role": "user", "content": follow_up})
    return answers


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_sync_client_sees_what_it_sees_directly_and_the_log_rebuilds(
    tmp_path: Path, stream: bool
) -> None:
    run = direct_and_proxied(
        tmp_path,
        SCRIPT,
        "anthropic",
        ("/anthropic", ""),
        lambda url: Anthropic(base_url=url, api_key=SECRET),
        lambda client: play(client, stream=stream),
    )
    expected, got, direct, upstream, lines = (
        run.expected,
        run.got,
        run.direct,
        run.upstream,
        run.lines,
    )
    assert got == expected
    assert [a["stop"] for a in got] == ["tool_use", "end_turn", "tool_use", "end_turn"]
    assert got[0]["content"][0]["input"] == {"a": 1, "b": 2}
    sessions = sessions_in(tmp_path)
    assert len(sessions) == 1
    (session,) = sessions.values()
    assert_rebuilds(sessions, upstream)
    # The client's API version header reached the upstream as it sends it directly;
    # its key did too (the emulator records it redacted), and nothing of it is stored.
    version = direct.received[0].headers["anthropic-version"]
    assert upstream.received[0].headers["anthropic-version"] == version
    assert upstream.received[0].headers["authorization"] == "[redacted]"
    assert types_of(session).count("tool/result") == 2
    assert_no_secret(tmp_path, *lines)
    assert len(lines) == 4


async def test_async_client_with_thinking_sends_the_signed_reasoning_back(tmp_path: Path) -> None:
    script = [
        {"reasoning": "Add them.", "tool_calls": [{"name": "add", "arguments": '{"a":1,"b":2}'}]},
        {"text": "3"},
    ]
    upstream = Emulator(script=script)
    with serve(upstream.app) as port, proxy_on(tmp_path, upstream_for("anthropic", port)) as pp:
        client = AsyncAnthropic(base_url=f"http://127.0.0.1:{pp}", api_key=SECRET)
        messages: list[Any] = [{"role": "user", "content": "What is 1 + 2?"}]
        first = await client.messages.create(
            model=MODEL, max_tokens=256, messages=messages, tools=TOOLS_ANTHROPIC
        )
        thinking, call = first.content
        assert thinking.type == "thinking"
        assert call.type == "tool_use"
        messages.append({"role": "assistant", "content": first.content})  # the SDK objects
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "3"}],
            }
        )
        second = await client.messages.create(
            model=MODEL, max_tokens=256, messages=messages, tools=TOOLS_ANTHROPIC
        )
        await client.close()
    assert second.content[0].text == "3"
    sessions = sessions_in(tmp_path)
    assert len(sessions) == 1
    (session,) = sessions.values()
    assert not any(isinstance(e.surface_op, dict) for e in session.events), "nothing replaced"
    assert_rebuilds(sessions, upstream)
    sent = decode(upstream.received[1].body)["messages"][1]["content"][0]
    assert sent["type"] == "thinking"
    assert sent["signature"] == thinking.signature
