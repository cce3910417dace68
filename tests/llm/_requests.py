"""Representative neutral requests shared by the wire and client tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tapelog.llm import LlmRequest
from tapelog.log._api import EpochHeader, LlmCallConfig

READ_TOOL = {
    "name": "read",
    "description": "Read a file.",
    # Deliberately not in sorted key order: the wires must keep it.
    "parameters": {
        "type": "object",
        "required": ["path"],
        "properties": {"path": {"type": "string"}},
    },
}


def text(role: str, value: str) -> dict[str, Any]:
    return {"role": role, "content": [{"type": "text", "text": value}]}


def tool_result(call_id: str, content: Any, *, is_error: bool = False) -> dict[str, Any]:
    block = {
        "type": "tool_result",
        "tool_call_id": call_id,
        "content": content,
        "is_error": is_error,
    }
    return {"role": "tool", "content": [block]}


def call(call_id: str, arguments: str = '{"path": "a.txt"}') -> dict[str, Any]:
    return {"type": "tool_call", "id": call_id, "name": "read", "arguments": arguments}


def make_request(
    messages: Sequence[Mapping[str, Any]],
    *,
    provider: str = "openai",
    model: str = "m1",
    system: str | None = "Be brief.",
    tools: Sequence[Mapping[str, Any]] = (READ_TOOL,),
    prefix: Sequence[Mapping[str, Any]] = (),
    seqs: Sequence[int] | None = None,
    **config: Any,
) -> LlmRequest:
    header = EpochHeader(
        config=LlmCallConfig(provider=provider, model=model, **config),
        system=system,
        tools=tools,
        prefix=prefix,
    )
    history = list(messages)
    if seqs is None:
        seqs = [10 + 2 * i for i in range(len(history))]
    return LlmRequest(
        header=header,
        messages=[*prefix, *history],
        node_seqs=(*(None for _ in prefix), *seqs),
    )


# A loop after one tool round trip: user, assistant (reasoning + text + call), tool result.
TOOL_LOOP = [
    text("user", "Show a.txt"),
    {
        "role": "assistant",
        "content": [
            {"type": "reasoning", "text": "Need the file.", "signature": "sig-1"},
            {"type": "text", "text": "Reading."},
            call("c1"),
        ],
    },
    tool_result("c1", "hello"),
]
