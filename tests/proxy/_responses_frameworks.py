"""Agent frameworks on the OpenAI Responses API (``POST /v1/responses``).

The OpenAI Agents SDK with its default model (a model name, the default client:
``OpenAIResponsesModel``) and pydantic-ai's ``OpenAIResponsesModel``, each
playing ``SCRIPT``: the model reasons and calls ``add``, the framework runs it
and sends the result, the model answers; then a follow-up with the first
turn's history. Same shape as ``_frameworks`` (one :class:`Turn` per run).
"""

from __future__ import annotations

from typing import Any

from agents import Agent as AgentsAgent
from agents import OpenAIProvider as AgentsProvider
from agents import RunConfig, Runner, function_tool, set_tracing_disabled
from openai import AsyncOpenAI
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.models.openai import OpenAIResponsesModel
from pydantic_ai.providers.openai import OpenAIProvider

from ._frameworks import INSTRUCTIONS, Turn, without
from ._helpers import SECRET

set_tracing_disabled(True)

MODEL = "gpt-5"
SCRIPT: list[dict[str, Any]] = [
    {"reasoning": "Add them.", "tool_calls": [{"name": "add", "arguments": '{"a": 1, "b": 2}'}]},
    {"text": "1 + 2 = 3"},
    {"reasoning": "Add again.", "tool_calls": [{"name": "add", "arguments": '{"a": 3, "b": 4}'}]},
    {"text": "3 + 4 = 7"},
]
PROMPTS = ("What is 1 + 2?", "And 3 + 4?")


@function_tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def agents_default_turn(base_url: str, prompt: str, history: Any, stream: bool) -> Turn:
    """The Agents SDK's default model: a model name resolved by its default
    provider (Responses API), here given a client for ``base_url``."""
    client = AsyncOpenAI(base_url=base_url, api_key=SECRET)
    config = RunConfig(model_provider=AgentsProvider(openai_client=client))
    agent = AgentsAgent(name="calculator", instructions=INSTRUCTIONS, tools=[add], model=MODEL)
    items = [*(history or []), {"role": "user", "content": prompt}]
    try:
        if stream:
            result: Any = Runner.run_streamed(agent, items, run_config=config)
            async for _ in result.stream_events():
                pass
        else:
            result = await Runner.run(agent, items, run_config=config)
    finally:
        await client.close()
    history = result.to_input_list()
    seen = {"history": history, "usage": [r.usage for r in result.raw_responses]}
    return Turn(output=result.final_output, seen=seen, history=history)


async def pydantic_responses_turn(base_url: str, prompt: str, history: Any, stream: bool) -> Turn:
    """pydantic-ai's ``OpenAIResponsesModel``."""
    model = OpenAIResponsesModel(MODEL, provider=OpenAIProvider(base_url=base_url, api_key=SECRET))
    agent = PydanticAgent(model, instructions=INSTRUCTIONS)

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    async with agent:
        if stream:
            async with agent.run_stream(prompt, message_history=history) as run:
                output = await run.get_output()
            messages = run.all_messages()
        else:
            done = await agent.run(prompt, message_history=history)
            output, messages = done.output, done.all_messages()
    seen = without(
        [m.model_dump(mode="json") if hasattr(m, "model_dump") else repr(m) for m in messages],
        frozenset({"timestamp", "run_id", "conversation_id", "provider_url"}),
    )
    return Turn(output=output, seen=seen, history=messages)


RESPONSES_FRAMEWORKS = {
    "openai-agents-default": agents_default_turn,
    "pydantic-ai-responses": pydantic_responses_turn,
}
