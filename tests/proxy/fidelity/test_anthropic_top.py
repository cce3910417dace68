"""Top-level fields, request headers and the query string: logged, re-sent, audited."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ._anthropic import TOOL, body, carry, reply

HELLO = [{"role": "user", "content": "hello"}]
FIELDS: dict[str, dict[str, Any]] = {
    "thinking enabled": {"thinking": {"type": "enabled", "budget_tokens": 1024}},
    "thinking adaptive, display omitted": {"thinking": {"type": "adaptive", "display": "omitted"}},
    "context_management": {
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]}
    },
    "metadata": {"metadata": {"user_id": '{"device_id":"d","session_id":"s"}'}},
    "tool_choice auto": {"tool_choice": {"type": "auto", "disable_parallel_tool_use": True}},
    "tool_choice any": {"tool_choice": {"type": "any"}},
    "tool_choice tool": {"tool_choice": {"type": "tool", "name": "add"}},
    "tool_choice none": {"tool_choice": {"type": "none"}},
    "output_config": {"output_config": {"effort": "medium"}},
    "top-level cache_control": {"cache_control": {"type": "ephemeral"}},
    "a field from the future": {"telepathy": {"level": 3}, "service_tier": "auto"},
}


@pytest.mark.parametrize("name", list(FIELDS))
async def test_a_top_level_field_is_carried_in_order_and_a_change_named(
    tmp_path: Path, name: str
) -> None:
    fields = FIELDS[name]
    first = body(HELLO, tools=[TOOL], **fields)

    def then(answer: Any) -> dict[str, Any]:
        more = [*HELLO, reply(answer), {"role": "user", "content": "more"}]
        return body(more, tools=[TOOL], **{k: {"changed": v} for k, v in fields.items()})

    carried = await carry(tmp_path, first, then)
    header = carried.session.header
    assert header is not None
    assert list(header.config.extras) == list(fields)  # the client's order
    assert carried.changed(2)["config"] == {
        f"extras.{k}": [v, {"changed": v}] for k, v in fields.items()
    }


async def test_beta_headers_and_the_query_string_are_logged_and_re_sent(tmp_path: Path) -> None:
    betas = {"anthropic-beta": "context-management-2025-06-27", "anthropic-version": "2023-06-01"}
    later = {**betas, "anthropic-beta": "context-management-2025-06-27,effort-2025-11-24"}

    def then(answer: Any) -> dict[str, Any]:
        return body([*HELLO, reply(answer), {"role": "user", "content": "more"}])

    carried = await carry(tmp_path, body(HELLO), then, headers=[betas, later], query="?beta=true")
    header = carried.session.header
    assert header is not None
    assert dict(header.config.headers) == later
    assert header.config.wire["query"] == "beta=true"
    assert header.config.wire["cache_markers"] == "client"
    # A new beta is a header change the audit names, old and new.
    assert carried.changed(2)["config"] == {
        "headers.anthropic-beta": [betas["anthropic-beta"], later["anthropic-beta"]]
    }
