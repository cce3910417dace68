"""An agent wired to the in-process emulator through the real adapters.

Nothing of tapelog is faked: the emulator is the network edge and speaks the
providers' wire protocols; the adapters send real HTTP bodies through httpx's
ASGI transport.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import httpx

from tapelog.agent import Agent, Hooks, RetryPolicy, Tool
from tapelog.emulator import Emulator
from tapelog.llm import make_client
from tapelog.log import LlmCallConfig, Session, decode

SECRET = "sk-test-SECRET-do-not-log-4242"

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


def types_of(session: Session) -> list[str]:
    return [e.type for e in session.events if e.type != "assistant/chunk"]
