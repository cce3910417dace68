"""The peer columns of ``bench/bench_memory.py``: memory per history message
in the harnesses users would pick instead of tapelog.

    python bench/_memory_peers.py PEER MESSAGES WORKLOAD_JSON

Each peer runs ``bench_memory``'s workload, byte for byte the same text
(``bench_memory`` passes it as ``WORKLOAD_JSON``: templates where ``{n}`` is
the global step or turn and ``{key}`` the tool's argument): per turn a
~140-byte prompt, two tool steps (a short text and a ``lookup`` call with
arguments like ``{"key": "k12"}``, whose result is ~300 bytes), then a
~160-byte answer, against a model that answers at once and keeps nothing of
what it is sent. The history is carried across turns the way each framework
documents, and the process grows it until it has at least ``MESSAGES``
history messages, then prints one JSON object: ``messages``,
``peak_rss_kb`` (:func:`peak_kb`) and ``seconds``.

A *history message* is counted as tapelog's surface counts it: the user
message, each assistant message (its text and tool call together: one
message), each tool result; six per turn.

- ``pydantic_ai``: ``pydantic_ai.Agent`` with a ``FunctionModel``; the
  history is ``result.all_messages()`` passed back as ``message_history``.
  Its ``ModelRequest``/``ModelResponse`` messages map one to one (a response
  holds the ``TextPart`` and the ``ToolCallPart``; a request the user prompt or
  the ``ToolReturnPart``).
- ``openai_agents``: ``agents.Agent`` run by ``Runner.run`` with a custom
  ``Model``; the history is ``result.to_input_list()`` plus the next user
  message. Its items map to ours except the ``function_call`` item, which
  belongs to the assistant ``message`` item before it (not counted).
- ``miniharness``: miniharness's ``AgentLoop`` (GitHub
  ZZKeepCurious/mini-deepseek-harness-python) with an adapter that streams the
  same steps; the history is its in-memory session log, counted as
  ``bench/miniharness_cold.py`` counts it (``*/message`` events and
  ``tool/result``). It runs with the interpreter of its bench-only venv (see
  ``bench/bench_cold.py``), so this file imports nothing from tapelog and
  each framework only when its column runs.

The child prints with ``json`` (the miniharness venv has neither tapelog nor
orjson).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import resource
import shutil
import string
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

PEERS = ("pydantic_ai", "openai_agents", "miniharness")
MINIHARNESS_PYTHON = "MINIHARNESS_PYTHON"
TOOL_DOC = "Look a key up in the project notes."


def fill(template: str, **values: object) -> str:
    """``template`` with each ``{name}`` replaced (``str.format`` would trip on
    the braces of the tool arguments), then each ``{words:N}`` by ``N``
    characters of words (:func:`words`) drawn for the text filled so far."""
    for name, value in values.items():
        template = template.replace(f"{{{name}}}", str(value))
    head, marker, rest = template.partition("{words:")
    if not marker:
        return template
    size, _, tail = rest.partition("}")
    return head + words(int(size), seed=head) + fill(tail)


_VOCABULARY = [
    "".join(random.Random(i).choices(string.ascii_lowercase, k=2 + i % 8)) for i in range(2_000)
]


def words(size: int, *, seed: str) -> str:
    """``size`` characters of pseudo-words, the same for the same ``seed`` in
    every process: every turn's text differs, as a real history's does (a
    text repeated turn after turn would let a compressing log look smaller
    than it is), and the letters are drawn at random, so it compresses worse
    than prose."""
    draw = random.Random(seed)
    out = ""
    while len(out) < size:
        out += draw.choice(_VOCABULARY) + " "
    return out[:size]


def step_reply(step: int, workload: dict[str, Any]) -> tuple[str, tuple[str, str] | None]:
    """Global step ``step`` (1-based): its text and, on a tool step, the
    ``lookup`` call's id and arguments (two tool steps, then an answer)."""
    if (step - 1) % workload["steps_per_turn"] < workload["steps_per_turn"] - 1:
        call = (f"call_{step}", fill(workload["arguments"], n=step))
        return fill(workload["note"], n=step), call
    return fill(workload["answer"], n=step), None


def _pydantic_ai(messages: int, workload: dict[str, Any]) -> int:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    calls = 0

    def answer(sent: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        nonlocal calls
        calls += 1
        text, call = step_reply(calls, workload)
        parts: list[TextPart | ToolCallPart] = [TextPart(content=text)]
        if call is not None:
            parts.append(ToolCallPart(tool_name="lookup", args=call[1], tool_call_id=call[0]))
        return ModelResponse(parts=parts)

    agent = Agent(FunctionModel(answer), system_prompt=workload["system"])

    @agent.tool_plain(docstring_format="google")
    def lookup(key: str) -> str:
        """Look a key up in the project notes.

        Args:
            key: The note to read.
        """
        return fill(workload["result"], key=key)

    history: list[ModelMessage] = []
    turn = 0
    while len(history) < messages:
        turn += 1
        result = agent.run_sync(fill(workload["prompt"], n=turn), message_history=history)
        history = result.all_messages()
    return len(history)


def _openai_agents(messages: int, workload: dict[str, Any]) -> int:
    from agents import (
        Agent,
        Model,
        ModelResponse,
        Runner,
        Usage,
        function_tool,
        set_tracing_disabled,
    )
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    set_tracing_disabled(True)  # it would otherwise export traces to OpenAI

    class InstantModel(Model):
        """Answers each request at once with the next step; keeps nothing."""

        def __init__(self) -> None:
            self.calls = 0

        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            self.calls += 1
            text, call = step_reply(self.calls, workload)
            content = ResponseOutputText(type="output_text", text=text, annotations=[])
            output: list[Any] = [
                ResponseOutputMessage(
                    id=f"msg_{self.calls}",
                    type="message",
                    role="assistant",
                    status="completed",
                    content=[content],
                )
            ]
            if call is not None:
                output.append(
                    ResponseFunctionToolCall(
                        type="function_call", call_id=call[0], name="lookup", arguments=call[1]
                    )
                )
            return ModelResponse(output=output, usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            raise NotImplementedError("the bench does not stream")

    @function_tool
    def lookup(key: str) -> str:
        """Look a key up in the project notes.

        Args:
            key: The note to read.
        """
        return fill(workload["result"], key=key)

    agent = Agent(
        name="bench", instructions=workload["system"], model=InstantModel(), tools=[lookup]
    )

    async def grow() -> int:
        history: list[Any] = []
        counted = turn = 0
        while counted < messages:
            turn += 1
            user = {"role": "user", "content": fill(workload["prompt"], n=turn)}
            result = await Runner.run(agent, [*history, user])
            new = result.to_input_list()
            counted += sum(1 for item in new[len(history) :] if item.get("type") != "function_call")
            history = new
        return counted

    return asyncio.run(grow())


def _miniharness(messages: int, workload: dict[str, Any]) -> int:
    from miniharness.core.agent_loop.agent import AgentLoop
    from miniharness.core.scope import Context
    from miniharness.core.session_store import install_sessions
    from miniharness.core.tools import Tool, ToolRegistry
    from miniharness.llm.protocol import LlmAdapter, StreamChunk

    class InstantAdapter(LlmAdapter):  # type: ignore[misc]
        """Streams the next step at once (one text block, then the call)."""

        provider = "fake"

        def __init__(self) -> None:
            self.calls = 0

        def resolve_model_info(self) -> dict[str, Any]:
            return {"provider": "fake", "model": None, "input_modalities": ["text"]}

        async def stream(
            self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], signal: Any = None
        ) -> AsyncIterator[Any]:
            self.calls += 1
            text, call = step_reply(self.calls, workload)
            yield StreamChunk("block-start", index=0, blockType="text")
            yield StreamChunk("text-delta", index=0, text=text)
            yield StreamChunk("block-end", index=0, block={"type": "text", "text": text})
            if call is None:
                yield StreamChunk("finish", reason={"kind": "stop"})
                return
            call_id, arguments = call
            yield StreamChunk("block-start", index=1, blockType="tool-call")
            yield StreamChunk(
                "tool-call-delta", index=1, id=call_id, name="lookup", argumentsDelta=arguments
            )
            block = {"type": "tool-call", "id": call_id, "name": "lookup", "arguments": arguments}
            yield StreamChunk("block-end", index=1, block=block)
            yield StreamChunk("finish", reason={"kind": "tool-calls"})

    ctx = Context(name="root")
    store = install_sessions(ctx)
    session = store.prepare("memory", {"meta": {"cwd": os.getcwd()}})
    registry = ToolRegistry(ctx)
    registry.register(
        Tool(
            name="lookup",
            description=TOOL_DOC,
            parameters={
                "type": "object",
                "properties": {"key": {"type": "string", "description": "The note to read."}},
                "required": ["key"],
            },
            execute=lambda args, _: fill(workload["result"], key=args["key"]),
        )
    )
    loop = AgentLoop(session, InstantAdapter(), registry, ctx, system_prompt=workload["system"])
    loop.publish()
    counted = seen = turn = 0
    while counted < messages:
        turn += 1
        loop.followup(fill(workload["prompt"], n=turn))
        events = session.events
        counted += sum(
            1
            for event in events[seen:]
            if event["type"].endswith("/message") or event["type"] == "tool/result"
        )
        seen = len(events)
    return counted


_GROW: dict[str, Callable[[int, dict[str, Any]], int]] = {
    "pydantic_ai": _pydantic_ai,
    "openai_agents": _openai_agents,
    "miniharness": _miniharness,
}


def peak_kb() -> int:
    """This process's peak resident set in KB: ``VmHWM``, the high-water mark
    of this program's own memory. Not ``ru_maxrss``: Linux carries a
    parent's peak over ``exec`` into it, so a child smaller than the bench's
    parent (~52 MB; miniharness at 100 messages is ~30 MB) would report the
    parent's peak and seem not to grow."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # no /proc: the rusage


def child(peer: str, messages: int, workload: dict[str, Any]) -> dict[str, Any]:
    """One measurement, in this (fresh) process."""
    started = time.perf_counter()
    counted = _GROW[peer](messages, workload)
    return {
        "messages": counted,
        "peak_rss_kb": peak_kb(),
        "seconds": round(time.perf_counter() - started, 2),
    }


def interpreter(peer: str) -> str | None:
    """The Python that runs ``peer``'s column, or ``None`` where it is not
    installed (miniharness lives in its own venv, named by an environment
    variable)."""
    if peer != "miniharness":
        return sys.executable
    python = os.environ.get(MINIHARNESS_PYTHON)
    return python if python and shutil.which(python) else None


def skipped(peer: str) -> str:
    """Why ``peer``'s column is not there."""
    python = os.environ.get(MINIHARNESS_PYTHON)
    if not python:
        return f"{MINIHARNESS_PYTHON} is not set (see bench/bench_cold.py's docstring)"
    return f"{MINIHARNESS_PYTHON}={python} is not an interpreter"


def measure(peer: str, messages: int, workload: dict[str, Any]) -> dict[str, Any]:
    """One measurement of ``peer`` in a fresh subprocess."""
    python = interpreter(peer)
    if python is None:
        raise RuntimeError(skipped(peer))
    argv = [python, __file__, peer, str(messages), json.dumps(workload)]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{peer} {messages} failed:\n{done.stderr}")
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


if __name__ == "__main__":
    print(json.dumps(child(sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]))))
