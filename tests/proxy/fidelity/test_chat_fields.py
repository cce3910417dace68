"""Chat completions top-level fields carried exactly, in the client's order,
and the one that routes a prompt cache named by the audit when it changes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tapelog.log import decode

from .._helpers import assert_rebuilds, post, sessions_in
from ._carry import CHAT, MODEL, after, assert_carried, carry, carry_two, in_process

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


async def test_a_changed_prompt_cache_key_is_another_linked_conversation(
    tmp_path: Path,
) -> None:
    """OpenAI routes a prefix by its key, and a client names its conversation by
    it (docs/proxy.md, "Another agent of the same client"): the same history
    under a new key is carried exactly, as its own session linked to the first,
    whose prefix the audit finds unbroken."""
    first = {"model": MODEL, "messages": HELLO, "prompt_cache_key": "a"}
    async with in_process(tmp_path, provider="openai") as (_, emu, http):
        answer = await post(http, CHAT, first)
        assert answer.status_code == 200, answer.text
        second = {**after(first, answer, {"role": "user", "content": "more"})}
        second["prompt_cache_key"] = "b"
        again = await post(http, CHAT, second)
        assert again.status_code == 200, again.text
    for body, got in zip([first, second], emu.received, strict=True):
        assert_carried(body, decode(got.body))
    sessions = sessions_in(tmp_path)
    assert_rebuilds(sessions, emu)
    assert len(sessions) == 2, sorted(sessions)
    origins = {
        sid: next(e.data for e in s.events if e.type == "session/origin")
        for sid, s in sessions.items()
        if any(e.type == "session/origin" for e in s.events)
    }
    ((child, origin),) = [(sid, o) for sid, o in origins.items() if "parent" in o]
    (parent,) = set(sessions) - {child}
    assert origin["parent"] == parent
    assert origin["client"] == {"signal": "prompt_cache_key", "id": "b"}
    header = next(e for e in sessions[child].events if e.type == "request/header")
    assert header.data["header"]["config"]["extras"]["prompt_cache_key"] == "b"


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


@pytest.mark.parametrize("stop", ["END", ["END"], ["END", "STOP"]])
async def test_stop_is_carried_as_the_client_spelled_it(tmp_path: Path, stop: Any) -> None:
    """A ``stop`` string reaches the upstream as that string, a list as that list
    (the header logs which: ``config.wire.stop_string``)."""
    body = {"model": MODEL, "messages": HELLO, "stop": stop}
    run = await carry(tmp_path, [body])  # the upstream body parses equal to the client's
    header = next(e for e in run.session.events if e.type == "request/header")
    wire = header.data["header"]["config"].get("wire", {})
    assert wire.get("stop_string", False) is isinstance(stop, str)
