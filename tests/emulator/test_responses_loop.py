"""tapelog's own loop on the Responses wire against the emulator's Responses
API: the emulator checks what a real server would (encrypted reasoning sent
back intact, tool items paired), and every body it received rebuilds from the log."""

from __future__ import annotations

import httpx

from tapelog.agent import Agent, RetryPolicy, tool
from tapelog.audit import cache_report, encode_request, rebuild_requests
from tapelog.emulator import Emulator
from tapelog.llm import make_client
from tapelog.log._api import LlmCallConfig, Session

from ._helpers import BASE


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def test_the_loop_on_the_responses_wire() -> None:
    emu = Emulator(
        script=[
            {
                "reasoning": "Use the tool.",
                "tool_calls": [{"name": "add", "arguments": '{"a": 2, "b": 3}'}],
            },
            {"text": "5."},
            {"reasoning": "Easy.", "text": "ok"},
        ]
    )
    config = LlmCallConfig(
        provider="openai", model="gpt-5-mini", wire={"api": "responses"}, reasoning_effort="low"
    )
    session = Session()
    async with httpx.AsyncClient(transport=emu.transport()) as http:
        client = make_client(
            config, base_url=f"{BASE}/v1", http_client=http, env={"OPENAI_API_KEY": "k"}
        )
        agent = Agent(
            session, client, config=config, tools=[add], retry=RetryPolicy(base_delay=0.0)
        )
        first = await agent.run("What is 2 + 3?")
        second = await agent.run("Thanks.")
    assert (first.text, second.text) == ("5.", "ok")
    assert [r.status for r in emu.received] == [200, 200, 200]
    bodies = [r.json() for r in emu.received]
    # The reasoning the emulator sealed went back intact (it refuses an altered one).
    assert [i["type"] for i in bodies[1]["input"]][1:3] == ["reasoning", "function_call"]
    assert isinstance(bodies[1]["input"][1]["encrypted_content"], str)
    rebuilt = [encode_request(r.request) for r in rebuild_requests(session.events)]
    assert rebuilt == [r.body for r in emu.received]
    # The emulator and the audit render the prompt alike: what it reported is expected.
    report = cache_report(session)
    assert all(c.kind != "unexplained" for row in report.requests for c in row.causes)
