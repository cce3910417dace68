"""An agent wired to the in-process emulator through the real adapters.

Nothing of tapelog is faked: the emulator is the network edge and speaks the
providers' wire protocols; the adapters send real HTTP bodies through httpx's
ASGI transport.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import httpx

from tapelog.agent import Agent, Hooks, RetryPolicy, Tool, tool
from tapelog.audit import encode_request, rebuild_requests
from tapelog.emulator import Emulator
from tapelog.llm import make_client
from tapelog.log import decode
from tapelog.log._api import LlmCallConfig, Session

SECRET = "sk-test-SECRET-do-not-log-4242"

# Long enough (> 1024 estimated tokens) that OpenAI's and Anthropic's minimums are met.
LONG_SYSTEM = "\n".join(f"Rule {i}: answer carefully and cite the tool output." for i in range(110))


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: First addend.
        b: Second addend.
    """
    return a + b


@tool
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


WIRES: dict[str, tuple[str, str, str, str]] = {
    # provider: (model, base url on the emulator, key variable, emulator rule)
    "deepseek": ("deepseek-chat", "http://emulator/deepseek", "DEEPSEEK_API_KEY", "deepseek"),
    "openai": ("gpt-4.1-mini", "http://emulator/openai/v1", "OPENAI_API_KEY", "openai"),
    "anthropic": (
        "claude-sonnet-4-5",
        "http://emulator/anthropic",
        "ANTHROPIC_API_KEY",
        "anthropic",
    ),
}


@asynccontextmanager
async def agent_on(
    emulator: Emulator,
    *,
    provider: str = "deepseek",
    session: Session | None = None,
    system: str | None = "You are terse.",
    tools: Sequence[Tool] = (),
    hooks: Hooks | None = None,
    config: Mapping[str, Any] | None = None,
    **options: Any,
) -> AsyncIterator[Agent]:
    model, base_url, key_env, _ = WIRES[provider]
    cfg = LlmCallConfig(provider=provider, model=model, **(config or {}))
    async with httpx.AsyncClient(transport=emulator.transport(), timeout=30) as http:
        client = make_client(cfg, base_url=base_url, http_client=http, env={key_env: SECRET})
        yield Agent(
            session if session is not None else Session(),
            client,
            config=cfg,
            system=system,
            tools=tools,
            hooks=hooks,
            retry=RetryPolicy(base_delay=0.0),
            **options,
        )


def messages_of(body: bytes, provider: str) -> list[Any]:
    """The message list of a request body (Anthropic keeps system apart already)."""
    messages: list[Any] = decode(body)["messages"]
    return messages


def assert_bytes_rebuild(
    session: Session,
    emulator: Emulator,
    *,
    loop_body: Callable[[bytes], bool] = lambda body: True,
) -> None:
    """Every loop body the emulator received is the rebuilt request, in order.

    A retry resends the same bytes, so repeats in a row count once;
    ``loop_body`` says which received bodies are loop requests at all (a
    compaction's one-shot summary call is not).
    """
    rebuilt = [encode_request(r.request) for r in rebuild_requests(session.events)]
    received: list[bytes] = []
    for r in emulator.received:
        if loop_body(r.body) and (not received or received[-1] != r.body):
            received.append(r.body)
    assert len(rebuilt) == len(received)
    for i, (mine, theirs) in enumerate(zip(rebuilt, received, strict=True)):
        assert mine == theirs, f"request {i + 1}"


def types_of(session: Session) -> list[str]:
    return [e.type for e in session.events if e.type != "assistant/chunk"]
