"""Chat completions tools and tool messages carried exactly: tools that are not
plain function tools, and tool results sent as parts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ._carry import MODEL, carry, carry_two

FUNCTION = {"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}
CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{}"}}
    ],
}
TOOLS: list[tuple[str, dict[str, Any]]] = [
    ("custom", {"type": "custom", "custom": {"name": "grammar", "format": {"type": "text"}}}),
    ("function with strict", {"type": "function", "function": {"name": "f", "strict": True}}),
    ("function with more members", {"type": "function", "function": {"name": "g"}, "x_cache": 1}),
    ("unknown type", {"type": "web_search", "web_search": {"name": "search"}}),
]


@pytest.mark.parametrize("tool", [t for _, t in TOOLS], ids=[n for n, _ in TOOLS])
async def test_a_tool_is_carried_as_sent(tmp_path: Path, tool: dict[str, Any]) -> None:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "tools": [tool]}
    await carry(tmp_path, [body])


RESULTS: list[tuple[str, Any]] = [
    ("one text part", [{"type": "text", "text": "3"}]),
    ("two text parts", [{"type": "text", "text": "3"}, {"type": "text", "text": "ok"}]),
    (
        "text and an image",
        [
            {"type": "text", "text": "see"},
            {"type": "image_url", "image_url": {"url": "https://x.test/i.png"}},
        ],
    ),
]


@pytest.mark.parametrize("content", [c for _, c in RESULTS], ids=[n for n, _ in RESULTS])
async def test_a_tool_result_in_parts_is_carried_as_sent(tmp_path: Path, content: Any) -> None:
    result = {"role": "tool", "tool_call_id": "c1", "content": content}
    messages = [{"role": "user", "content": "add"}, CALL, result]
    await carry(tmp_path, [{"model": MODEL, "messages": messages, "tools": [FUNCTION]}])


async def test_a_changed_custom_tool_is_named_by_the_audit(tmp_path: Path) -> None:
    custom = TOOLS[0][1]
    first = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "tools": [custom]}
    lark = {"type": "custom", "custom": {"name": "grammar", "format": {"type": "grammar"}}}
    run = await carry_two(tmp_path, first, lambda b: {**b, "tools": [lark]})
    (cause,) = run.causes(2)
    assert cause["kind"] == "header-delta"
    assert cause["detail"]["tools"]["changed"] == ["grammar"]
