"""A key registered after the header's pieces were made is still never logged.

Issue 16, items a and b. (a) A ``@tool`` is made at import, its schema frozen
then; a key in its description that is registered later (by the CLI at start,
a client when it is made) reached ``request/header`` and the provider in clear,
because ``freeze`` kept already-frozen containers as they were. (b)
``make_client`` registered its key only at the first send, after the first
request's header was logged, so a key in the system prompt or a tool
description of that first request was logged in clear.
"""

from __future__ import annotations

import httpx
import pytest

from tapelog.agent import Agent, tool
from tapelog.emulator import Emulator
from tapelog.llm import make_client
from tapelog.log import redact, register_secret
from tapelog.log._api import LlmCallConfig, Session
from tapelog.log._redact import REDACTED

from ._harness import WIRES, agent_on, assert_bytes_rebuild

LATE = "sk-late-TOOL-key-5150-abcdef"


@tool
def lookup(key: str) -> str:
    """Look a key up (the service's token is sk-late-TOOL-key-5150-abcdef)."""
    return f"value of {key}"


def _three_steps() -> Emulator:
    return Emulator(
        script=[
            {"tool_calls": [{"name": "lookup", "arguments": '{"key": "a"}'}]},
            {"tool_calls": [{"name": "lookup", "arguments": '{"key": "b"}'}]},
            {"text": "done"},
        ]
    )


@pytest.mark.parametrize("check", [True, False], ids=["check-on", "check-off"])
@pytest.mark.parametrize("provider", sorted(WIRES))
async def test_a_key_registered_after_a_tool_was_made_is_redacted_from_its_schema(
    provider: str, check: bool
) -> None:
    assert LATE in str(lookup.schema())  # made (and frozen) before the key is known
    register_secret(LATE)
    emulator = _three_steps()
    async with agent_on(emulator, provider=provider, tools=[lookup], check=check) as agent:
        result = await agent.run("look a and b up")
    assert result.ok, result.reason
    assert len(emulator.received) == 3
    for received in emulator.received:
        assert LATE.encode() not in received.body
        assert REDACTED.encode() in received.body
    events = agent.session.events
    assert all(LATE not in e.encode().decode() for e in events)
    # The offered header is compared to the fold as the log holds it: three
    # steps, one snapshot, no delta or fallback for the redaction alone.
    kinds = [e.type for e in events if e.type.startswith("request/header")]
    assert kinds == ["request/header"]
    assert_bytes_rebuild(agent.session, emulator)


@pytest.mark.parametrize("provider", sorted(WIRES))
async def test_the_clients_key_is_known_when_the_client_is_made(provider: str) -> None:
    model, base_url, variable, _ = WIRES[provider]
    key = f"sk-made-{provider}-Key-0042-zyx"
    env = {variable: key}
    config = LlmCallConfig(provider=provider, model=model)
    emulator = Emulator(script=[{"text": "ok"}])
    async with httpx.AsyncClient(transport=emulator.transport()) as http:
        client = make_client(config, base_url=base_url, http_client=http, env=env)
        assert redact(f"x {key} y") == f"x {REDACTED} y"  # before any send
        session = Session()
        agent = Agent(session, client, config=config, system=f"The deploy key is {key}.")
        result = await agent.run("hi")
        assert result.ok, result.reason
        rotated = f"sk-rotated-{provider}-Key-0043-wvu"
        env[variable] = rotated  # a key may rotate: it is read (and registered) per send
        assert (await agent.run("again")).ok
    assert redact(rotated) == REDACTED
    first = next(e for e in session.events if e.type == "request/header")
    assert key not in first.encode().decode()
    assert REDACTED in first.data["header"]["system"]
    assert all(key.encode() not in r.body for r in emulator.received)
