"""A client whose next request leaves the model's tool call without its result.

Every provider refuses such a request, and the log's rules refuse the step
that would send it (``LogRules``: a call is answered before the next request).
The proxy refuses it first, before logging anything of it: the client gets one
400 and the log stays one that loads and verifies.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tapelog.emulator import Emulator
from tapelog.store._api import verify_jsonl

from ._helpers import in_process, post, sessions_in


async def test_a_request_that_leaves_a_call_unanswered_is_refused_and_the_log_loads(
    tmp_path: Path,
) -> None:
    script = [{"tool_calls": [{"name": "add", "arguments": '{"a": 1, "b": 2}'}]}, {"text": "3"}]
    emulator = Emulator(script=script)
    messages: list[Any] = [{"role": "user", "content": "1 + 2?"}]
    body = {"model": "deepseek-chat", "messages": messages}
    async with in_process(tmp_path, emulator=emulator) as (_, _, http):
        first = await post(http, "/v1/chat/completions", body)
        call = first.json()["choices"][0]["message"]["tool_calls"][0]
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "user", "content": "never mind"})  # no tool result
        second = await post(http, "/v1/chat/completions", body)
    assert second.status_code == 400
    assert "whose result does not follow it" in second.json()["error"]["message"]
    (session,) = sessions_in(tmp_path).values()  # it loads
    assert [e.type for e in session.events].count("turn/start") == 1
    (path,) = tmp_path.rglob(f"{session.id}.jsonl")
    assert verify_jsonl(path.read_bytes(), expected_id=session.id).ok
