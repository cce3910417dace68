"""Chat completions top-level fields carried exactly, in the client's order,
and the one that routes a prompt cache named by the audit when it changes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tapelog.log import decode

from ._carry import MODEL, carry, carry_two

HELLO = [{"role": "user", "content": "hello"}]

FIELDS: list[tuple[str, Any]] = [
    ("prompt_cache_key", "tenant-7"),
    ("prompt_cache_retention", "24h"),
    ("metadata", {"run": "r1", "team": "audit"}),
    ("store", True),
    ("service_tier", "flex"),
    ("prediction", {"type": "content", "content": "def f():\n    return 1\n"}),
    ("modalities", ["text", "audio"]),
    ("audio", {"voice": "alloy", "format": "wav"}),
    ("parallel_tool_calls", False),
    ("logit_bias", {"50256": -100, "1734": 5}),
    ("logprobs", True),
    ("top_logprobs", 3),
    ("user", "user-42"),
    ("safety_identifier", "hash-9"),
    ("verbosity", "low"),
    (
        "response_format",
        {
            "type": "json_schema",
            "json_schema": {
                "name": "answer",
                "schema": {"type": "object", "properties": {"b": {}, "a": {}}},
            },
        },
    ),
    ("tool_choice", "none"),
    ("web_search_options", {"search_context_size": "low"}),
    ("x_vendor_option", [1, {"z": 1, "a": 2}]),
    ("a null field", None),
]


@pytest.mark.parametrize(("name", "value"), FIELDS, ids=[n for n, _ in FIELDS])
async def test_a_top_level_field_is_carried_as_sent(tmp_path: Path, name: str, value: Any) -> None:
    body = {"model": MODEL, "messages": HELLO, name.replace(" ", "_"): value}
    await carry(tmp_path, [body])


async def test_top_level_fields_keep_the_clients_order(tmp_path: Path) -> None:
    body: dict[str, Any] = {"model": MODEL, "messages": HELLO}
    for name, value in reversed(FIELDS[:8]):
        body[name] = value
    run = await carry(tmp_path, [body])
    sent = decode(run.emulator.received[0].body)
    extras = [k for k in sent if k in dict(FIELDS)]
    assert extras == [name for name, _ in reversed(FIELDS[:8])]


async def test_a_changed_prompt_cache_key_is_named_by_the_audit(tmp_path: Path) -> None:
    first = {"model": MODEL, "messages": HELLO, "prompt_cache_key": "a"}
    run = await carry_two(tmp_path, first, lambda b: {**b, "prompt_cache_key": "b"})
    causes = run.causes(2)
    assert [c["kind"] for c in causes] == ["header-delta"]
    assert causes[0]["detail"]["config"] == {"extras.prompt_cache_key": ["a", "b"]}


async def test_the_same_prompt_cache_key_keeps_the_prefix(tmp_path: Path) -> None:
    first = {"model": MODEL, "messages": HELLO, "prompt_cache_key": "a"}
    run = await carry_two(tmp_path, first, lambda b: b)
    assert run.causes(2) == []


@pytest.mark.parametrize(
    ("provider", "spelling"),
    [
        ("openai", "max_tokens"),
        ("openai", "max_completion_tokens"),
        ("deepseek", "max_completion_tokens"),
        ("deepseek", "max_tokens"),
    ],
)
async def test_the_token_limit_is_spelled_as_the_client_spelled_it(
    tmp_path: Path, provider: str, spelling: str
) -> None:
    body = {"model": MODEL, "messages": HELLO, spelling: 64}
    run = await carry(tmp_path, [body], provider=provider)
    header = next(e for e in run.session.events if e.type == "request/header")
    wire = header.data["header"]["config"].get("wire", {})
    default = "max_completion_tokens" if provider == "openai" else "max_tokens"
    assert wire.get("token_field") == (None if spelling == default else spelling)
