"""Tools keep every field: deferred tools, examples, markers, server tools of any type."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ._anthropic import TOOL, body, carry, reply

HELLO = [{"role": "user", "content": "hello"}]
TOOLS: dict[str, dict[str, Any]] = {
    "defer_loading": {**TOOL, "name": "later", "defer_loading": True},
    "input_examples": {**TOOL, "name": "ex", "input_examples": [{"a": 1}]},
    "cache_control": {**TOOL, "name": "marked", "cache_control": {"type": "ephemeral"}},
    "web_search": {"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
    "tool_search": {"type": "tool_search_tool_regex_20251119", "name": "tool_search"},
    "code_execution": {"type": "code_execution_20250825", "name": "code_execution"},
    "custom type": {"type": "custom", **TOOL, "name": "typed"},
}


@pytest.mark.parametrize("name", list(TOOLS))
async def test_a_tool_is_carried_and_a_change_to_it_is_named(tmp_path: Path, name: str) -> None:
    tool = TOOLS[name]
    changed = {**tool, "strict": True}  # any field the client changes

    def then(answer: Any) -> dict[str, Any]:
        more = [*HELLO, reply(answer), {"role": "user", "content": "more"}]
        return body(more, tools=[TOOL, changed])

    carried = await carry(tmp_path, body(HELLO, tools=[TOOL, tool]), then)
    assert carried.changed(2)["tools"]["changed"] == [tool["name"]]
