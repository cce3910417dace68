"""Agent frameworks from the package index, driven through ``tapelog proxy``.

Each framework plays the same scripted two-turn conversation (``SCRIPT``: the
model calls ``add``, the framework runs it and sends the result, the model
answers; then a follow-up question with the first turn's history). A turn is
one framework run against one base URL, so a test can point each turn at a
different proxy process over the same store (a restart between the turns) or
at the emulator directly (what the framework would see without the proxy).

The proxy is the real command (``tapelog proxy`` in a subprocess), so a
restart is a new process that finds the conversation in the store, and its
whole output (stdout and stderr) can be searched for the client's key.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from agents import Agent as AgentsAgent
from agents import OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
from openai import AsyncOpenAI
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.messages import ModelMessagesTypeAdapter
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.openai import OpenAIProvider

from . import _helpers
from ._helpers import SECRET, upstream_for

set_tracing_disabled(True)  # the Agents SDK would otherwise export traces to OpenAI

SCRIPT = cast(list[dict[str, Any]], _helpers.SCRIPT)
"""The model's side: a call of ``add``, its answer; again for the follow-up."""
INSTRUCTIONS = "You are terse."
PROMPTS = ("What is 1 + 2?", "And 3 + 4?")
OPENAI_MODEL = "deepseek-chat"
ANTHROPIC_MODEL = "claude-sonnet-4-5"


@dataclass(frozen=True, slots=True)
class Turn:
    """What one framework run gave back: the final output, a comparable view of
    everything the framework kept (answers, tool calls, usage), and the history
    to continue from."""

    output: str
    seen: Any
    history: Any


TurnFn = Callable[[str, str, Any, bool], Awaitable[Turn]]
"""``(base_url, prompt, history, stream) -> Turn``."""


@dataclass(frozen=True, slots=True)
class Framework:
    """A framework, the API its client speaks, and how to run one turn."""

    name: str
    provider: str  # the proxy's upstream: "deepseek" (OpenAI API) or "anthropic"
    turn: TurnFn

    def direct_url(self, emulator_port: int) -> str:
        """The base URL the framework's client takes to reach the emulator directly."""
        return upstream_for(self.provider, emulator_port).base_url

    def proxy_url(self, proxy_port: int) -> str:
        """The base URL the framework's client takes to reach the proxy."""
        root = f"http://127.0.0.1:{proxy_port}"
        return root if self.provider == "anthropic" else f"{root}/v1"


# pydantic-ai ------------------------------------------------------------------


_PER_RUN = frozenset({"timestamp", "run_id", "conversation_id", "provider_url"})
"""Fields of pydantic-ai's messages that differ on every run (clock, random ids)
or between the direct run and the proxied one (the base URL)."""


def without(value: Any, keys: frozenset[str]) -> Any:
    """``value`` without the members named ``keys``, at any depth (tuples become lists)."""
    if isinstance(value, dict):
        return {k: without(v, keys) for k, v in value.items() if k not in keys}
    if isinstance(value, list | tuple):
        return [without(v, keys) for v in value]
    return value


def _pydantic_agent(model: OpenAIChatModel | AnthropicModel) -> PydanticAgent[None, str]:
    agent = PydanticAgent(model, instructions=INSTRUCTIONS)

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    return agent


async def _pydantic_run(
    agent: PydanticAgent[None, str], prompt: str, history: Any, stream: bool
) -> Turn:
    async with agent:  # closes the provider's HTTP client at the end
        if stream:
            async with agent.run_stream(prompt, message_history=history) as run:
                output = await run.get_output()
            messages = run.all_messages()
        else:
            result = await agent.run(prompt, message_history=history)
            output, messages = result.output, result.all_messages()
    seen = without(ModelMessagesTypeAdapter.dump_python(messages, mode="json"), _PER_RUN)
    return Turn(output=output, seen=seen, history=messages)


async def pydantic_openai_turn(base_url: str, prompt: str, history: Any, stream: bool) -> Turn:
    """pydantic-ai's OpenAI chat-completions model, as docs/proxy.md sets it up."""
    model = OpenAIChatModel(
        OPENAI_MODEL, provider=OpenAIProvider(base_url=base_url, api_key=SECRET)
    )
    return await _pydantic_run(_pydantic_agent(model), prompt, history, stream)


async def pydantic_anthropic_turn(base_url: str, prompt: str, history: Any, stream: bool) -> Turn:
    """pydantic-ai's Anthropic model, as docs/proxy.md sets it up (its client always
    streams from the API, whether the agent streams or not)."""
    model = AnthropicModel(
        ANTHROPIC_MODEL, provider=AnthropicProvider(base_url=base_url, api_key=SECRET)
    )
    return await _pydantic_run(_pydantic_agent(model), prompt, history, stream)


# OpenAI Agents SDK ----------------------------------------------------------------


@function_tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def agents_turn(base_url: str, prompt: str, history: Any, stream: bool) -> Turn:
    """The OpenAI Agents SDK on chat completions, as docs/proxy.md sets it up."""
    client = AsyncOpenAI(base_url=base_url, api_key=SECRET)
    agent = AgentsAgent(
        name="calculator",
        instructions=INSTRUCTIONS,
        tools=[add],
        model=OpenAIChatCompletionsModel(model=OPENAI_MODEL, openai_client=client),
    )
    items = [*(history or []), {"role": "user", "content": prompt}]
    try:
        if stream:
            result: Any = Runner.run_streamed(agent, items)
            async for _ in result.stream_events():
                pass
        else:
            result = await Runner.run(agent, items)
    finally:
        await client.close()
    history = result.to_input_list()
    seen = {"history": history, "usage": [r.usage for r in result.raw_responses]}
    return Turn(output=result.final_output, seen=seen, history=history)


FRAMEWORKS = {
    "pydantic-ai-openai": Framework("pydantic-ai-openai", "deepseek", pydantic_openai_turn),
    "pydantic-ai-anthropic": Framework(
        "pydantic-ai-anthropic", "anthropic", pydantic_anthropic_turn
    ),
    "openai-agents": Framework("openai-agents", "deepseek", agents_turn),
}


# The proxy as a process -------------------------------------------------------------


@contextmanager
def proxy_process(
    store: Path, provider: str, emulator_port: int, output: list[str]
) -> Iterator[int]:
    """``tapelog proxy`` in a subprocess, forwarding to the emulator as ``provider``
    and writing to ``store``; its port. Every line it prints (stdout and stderr)
    is appended to ``output`` as it comes; it is stopped with Ctrl-C, as a user
    stops it, and must exit cleanly."""
    upstream = upstream_for(provider, emulator_port)
    command = [sys.executable, "-c", "from tapelog.cli import main; main()", "proxy"]
    command += ["--upstream", provider, "--base-url", upstream.base_url]
    command += ["--port", "0", "--store", str(store)]
    env = {
        **os.environ,
        "DEEPSEEK_API_KEY": "",
        "ANTHROPIC_API_KEY": "",
        "OPENAI_API_KEY": "",
        "TAPELOG_PROVIDERS": "",
    }
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=_read_lines, args=(proc, lines, output), daemon=True)
    reader.start()
    try:
        yield _port_of(lines)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
        reader.join(timeout=30)
        assert proc.stdout is not None
        proc.stdout.close()
    assert proc.returncode == 0, "".join(output)


def _read_lines(proc: subprocess.Popen[str], lines: queue.Queue[str], output: list[str]) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        output.append(line)
        lines.put(line)


def _port_of(lines: queue.Queue[str], timeout: float = 30) -> int:
    """The port from the proxy's banner, once it has printed all of it (the last
    line says how to name a session)."""
    banner: list[str] = []
    deadline = time.monotonic() + timeout
    while not banner or not banner[-1].startswith("name a session"):
        try:
            banner.append(lines.get(timeout=max(deadline - time.monotonic(), 0.01)))
        except queue.Empty:
            raise AssertionError(f"no banner from the proxy within {timeout} s: {banner}") from None
    found = re.search(r"http://127\.0\.0\.1:(\d+)", banner[0])
    assert found is not None, banner
    return int(found.group(1))
