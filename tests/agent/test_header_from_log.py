"""The request header is built from the log, never from the value offered to it.

Offered → logged → folded → sent: the loop logs the header it composed, then builds
the request from the session's fold of the header events. A registered secret in any
header field (system prompt, a tool's description) is therefore redacted identically
in the log and in the bytes the provider receives, with the checker on or off, and
the rebuild equals what was sent.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tapelog.agent import Tool, tool
from tapelog.emulator import Emulator
from tapelog.log import decode, register_secret
from tapelog.log._redact import REDACTED

from ._harness import SECRET, WIRES, agent_on, assert_bytes_rebuild


def make_lookup() -> Tool:
    @tool
    def lookup(key: str) -> str:
        """Look a key up (the service's token is sk-test-SECRET-do-not-log-4242)."""
        return f"value of {key}"

    return lookup


@pytest.mark.parametrize("check", [True, False], ids=["check-on", "check-off"])
@pytest.mark.parametrize("provider", sorted(WIRES))
async def test_a_secret_in_the_header_is_redacted_alike_in_the_log_and_the_request(
    provider: str, check: bool, tmp_path: Path
) -> None:
    register_secret(SECRET)  # known before anything is logged (as the CLI does at start)
    emulator = Emulator(
        script=[
            {"tool_calls": [{"name": "lookup", "arguments": '{"key": "a"}'}]},
            {"text": "done"},
            {"text": "again"},
        ]
    )
    system = f"You are terse. The deploy token is {SECRET}; never print it."
    async with agent_on(emulator, provider=provider, system=system, check=check) as agent:
        agent.add_tool(make_lookup())  # made once the key is known (registered)
        first = await agent.run("look a up")
        agent.system = system + "\nA second line."
        second = await agent.run("again")
    assert first.ok, first.reason
    assert second.ok, second.reason
    for received in emulator.received:
        assert SECRET.encode() not in received.body
        assert REDACTED.encode() in received.body
    header = next(e for e in agent.session.events if e.type == "request/header")
    assert SECRET not in str(header.data)
    assert REDACTED in header.data["header"]["system"]
    # One snapshot, then one delta for the changed line: the redacted fold is not
    # mistaken for a change at every step.
    kinds = [e.type for e in agent.session.events if e.type.startswith("request/header")]
    assert kinds == ["request/header", "request/header-delta"]
    assert decode(emulator.received[-1].body) is not None
    assert_bytes_rebuild(agent.session, emulator)
