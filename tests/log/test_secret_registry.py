"""What may be a secret, where redaction applies, and whose secrets apply where.

Issue 15, item 10: ``Bearer assistant`` registered ``assistant`` and ``freeze``
redacted every string, so event types (``***/chunk``), roles and ids were
rewritten and a session no longer loaded. Now one word is never a secret,
structure (keys, types, roles, kinds, ids) is never redacted, and a secret can
be the current context's alone (``secret_scope``: a proxy request's key).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from tapelog.log import redact, register_secret, secret_scope
from tapelog.log._api import (
    Session,
    freeze,
    freeze_faithful,
    has_secrets,
    looks_like_secret,
    names_a_secret,
)
from tapelog.log._redact import can_be_secret, forget_secrets
from tapelog.store import JsonlStore
from tapelog.store._api import verify_jsonl

from ._builders import HEADER, assistant, ticking_clock, tool_result, user

KEY = "sk-reg-Key-7f3a9c0d1e2b"


@pytest.fixture(autouse=True)
def _no_secrets_left() -> Iterator[None]:
    forget_secrets()
    yield
    forget_secrets()


@pytest.mark.parametrize(
    "word",
    ["assistant", "Assistant", "ASSISTANT", "production", "postgres", "internationalization"],
)
def test_one_word_is_never_a_secret(word: str) -> None:
    assert not can_be_secret(word)
    assert register_secret(word) is False
    assert redact(f"the {word} said") == f"the {word} said"
    assert not has_secrets()


@pytest.mark.parametrize(
    "value", [KEY, "hunter2-never-shown", "SuperSecret", "correcthorsebatterystaple", "pass word"]
)
def test_what_is_not_one_word_may_be_registered(value: str) -> None:
    assert register_secret(value) is True
    assert redact(f"<{value}>") == "<***>"


@pytest.mark.parametrize(
    ("value", "looks"),
    [
        ("Zq4vR9kT2mX7pL0sW3nB", True),
        ("ghp_0123456789abcdefABCDEF", True),
        ("4f9d0c2b1a5e4f9d0c2b1a5e", True),
        ("assistant", False),
        ("production-us-east", False),  # no digit
        ("us-east-1", False),  # too short
        ("/usr/local/bin/python3.11", False),  # a path
        ("https://example.com/v1/x9", False),  # a URL
        ("release 2024 candidate 7", False),  # words
        ("aaaaaaaaaaaaaaaa11111111", False),  # low entropy
    ],
)
def test_an_unnamed_value_is_a_secret_only_when_it_looks_generated(value: str, looks: bool) -> None:
    assert looks_like_secret(value) is looks


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("API_TOKEN", True),
        ("Authorization", True),
        ("api_key", True),
        ("DB_PASSWORD", True),
        ("X_AUTH", True),
        ("OAUTH_CLIENT", True),
        ("AGENT_ROLE", False),
        ("LOG_LEVEL", False),
        ("GIT_AUTHOR_NAME", False),
        ("SESSION_DIR", False),
    ],
)
def test_a_name_says_whether_its_value_is_a_secret(name: str, says: bool) -> None:
    assert names_a_secret(name) is says


def test_structure_is_never_redacted_content_always_is() -> None:
    call_id = "call_9Zq4vR9kT2mX7pL0"
    register_secret(call_id)
    register_secret(KEY)
    message = freeze(
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": f"calling with {KEY}"},
                {"type": "tool_call", "id": call_id, "name": "read", "arguments": f'"{KEY}"'},
                {"type": "tool_result", "tool_call_id": call_id, "content": f"id {call_id}"},
            ],
            KEY: KEY,
        }
    )
    text, call, result = message["content"]
    assert text["text"] == "calling with ***"
    assert (call["id"], call["arguments"]) == (call_id, '"***"')
    assert (result["tool_call_id"], result["content"]) == (call_id, "id ***")
    assert message[KEY] == "***"  # the key stays, its value is content


def test_a_session_whose_ids_and_provider_are_registered_loads_and_verifies(
    tmp_path: Path,
) -> None:
    call_id = "call_9Zq4vR9kT2mX7pL0"
    register_secret(call_id)
    register_secret("openai-Provider-01")  # a value that is also the header's provider
    session = Session("s-reg", clock=ticking_clock())
    header = {**HEADER, "config": {"provider": "openai-Provider-01", "model": "m"}}
    session.append("request/header", {"header": header, "reason": "initial"})
    session.append("turn/start", {"turn": 0})
    session.append("user/message", user(f"use {call_id}"), surface_op="append")
    session.append("step/start", {"turn": 0, "step": 0})
    call = {"type": "tool_call", "id": call_id, "name": "read", "arguments": f'"{call_id}"'}
    session.append(
        "assistant/message",
        {**assistant("", calls=0), "content": [call]},
        surface_op="append",
    )
    session.append(
        "tool/call",
        {"turn": 0, "step": 0, "call_id": call_id, "name": "read", "arguments": "{}"},
    )
    session.append("tool/result", tool_result(call_id, f"read {call_id}"), surface_op="append")
    session.append("step/end", {"turn": 0, "step": 0})
    session.append("turn/end", {"turn": 0, "reason": {"kind": "completed"}})
    store = JsonlStore(tmp_path)
    with store.create(session) as writer:
        writer.checkpoint()
    data = (tmp_path / "s-reg.jsonl").read_bytes()
    assert verify_jsonl(data, expected_id="s-reg").ok
    loaded = store.load("s-reg").session
    assert loaded.header.config.provider == "openai-Provider-01"
    [message] = [m for m in loaded.derive_messages() if m["role"] == "assistant"]
    assert message["content"][0]["id"] == call_id
    assert message["content"][0]["arguments"] == '"***"'
    assert data.count(b"use ***") == 1
    assert data.count(b"read ***") == 1


def test_a_scope_redacts_inside_only_and_nests() -> None:
    other = "tok-Other-0042-abcdef"
    with secret_scope([KEY, "assistant"]):  # the word is refused here too
        assert has_secrets()
        assert redact(f"{KEY} assistant") == "*** assistant"
        with secret_scope([other]):
            assert redact(f"{KEY} {other}") == "*** ***"
        assert redact(f"{KEY} {other}") == f"*** {other}"
        assert freeze({"text": KEY})["text"] == "***"
        assert freeze_faithful({"text": KEY})["text"] == KEY  # a rebuild never redacts
    assert not has_secrets()
    assert redact(KEY) == KEY


async def test_concurrent_scopes_never_see_each_others_secrets() -> None:
    keys = [f"sk-client-{i}-Key-{i}f3a9c0d1e" for i in range(8)]
    seen: dict[int, str] = {}

    async def client(i: int) -> None:
        with secret_scope([keys[i]]):
            await asyncio.sleep(0.001 * (8 - i))  # interleave
            seen[i] = redact(" ".join(keys))

    await asyncio.gather(*(client(i) for i in range(8)))
    for i, text in seen.items():
        assert text.split() == ["***" if j == i else k for j, k in enumerate(keys)]
    assert redact(keys[0]) == keys[0]
