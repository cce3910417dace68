"""End to end: a reference stdio server from the package index (mcp-server-time)
and a streamable-HTTP server, on the emulator, through the real loop.

The model calls both servers' tools; the HTTP server's tool list changes
mid-turn and the next request carries exactly that change as one logged
header delta; the stdio server is killed and the next call is a readable,
attributable tool error while the turn completes; every request the emulator
received rebuilds byte for byte from the log.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from agent._harness import SECRET, agent_on, assert_bytes_rebuild
from tapelog.emulator import Emulator
from tapelog.log._api import Event, Session
from tapelog.mcp import McpServers, ServerSpec

from ._servers import TIME, DynamicServer, child_pids, wait_until


@pytest.fixture(scope="module")
def dyn() -> Iterator[DynamicServer]:
    with DynamicServer().running() as server:
        yield server


def _call(call_id: str, name: str, arguments: str = "{}") -> dict[str, Any]:
    return {"id": call_id, "name": name, "arguments": arguments}


def _results(session: Session) -> dict[str, Event]:
    return {e.data["call_id"]: e for e in session.events if e.type == "tool/result"}


def _tool_names(body: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools", [])]


def _header_events_per_step(session: Session) -> list[tuple[int, int, list[Event]]]:
    """(turn, step, header events logged for that step's request), in order."""
    steps: list[tuple[int, int, list[Event]]] = []
    for event in session.events:
        if event.type == "step/start":
            steps.append((event.data["turn"], event.data["step"], []))
        elif event.type in ("request/header", "request/header-delta"):
            steps[-1][2].append(event)
    return steps


async def test_stdio_and_http_servers_list_change_and_a_killed_server(
    dyn: DynamicServer,
) -> None:
    emulator = Emulator()
    emulator.push(
        {
            "tool_calls": [
                _call("c1", "time__get_current_time", '{"timezone": "UTC"}'),
                _call("c2", "dyn__echo", '{"text": "hi there"}'),
            ]
        },
        {"tool_calls": [_call("c3", "dyn__enable_extra")]},
        {"tool_calls": [_call("c4", "dyn__extra", '{"n": 21}')]},
        {"text": "It is now, and 21 doubled is 42."},
        {"tool_calls": [_call("c5", "time__get_current_time", '{"timezone": "UTC"}')]},
        {"text": "The time server is gone."},
    )
    specs = [
        ServerSpec(name="time", command=TIME, args=("--local-timezone", "UTC")),
        ServerSpec(name="dyn", url=dyn.url),
    ]
    async with McpServers(specs) as servers, agent_on(emulator, tools=[servers]) as agent:
        first = await agent.run("What time is it? Then double 21.")
        assert first.reason == {"kind": "completed"}
        assert first.steps == 4

        pids = child_pids("mcp-server-time")
        assert len(pids) == 1
        os.kill(pids[0], signal.SIGKILL)
        await wait_until(lambda: servers.status()["time"].state == "closed")
        second = await agent.run("And the time now?")
        assert second.reason == {"kind": "completed"}
        assert second.text == "The time server is gone."

    session = agent.session
    results = _results(session)
    assert not results["c1"].data["is_error"]
    assert '"timezone": "UTC"' in results["c1"].data["content"]
    assert results["c2"].data["content"] == "hi there"
    assert results["c3"].data["content"] == "added the tool extra"
    assert results["c4"].data["content"] == "42"

    # The killed server: a readable error the model got, attributable in the log.
    dead = results["c5"].data
    assert dead["is_error"] is True
    assert "MCP server 'time' is not available" in dead["content"]
    assert dead["error"]["kind"] == "mcp"
    assert dead["error"]["server"] == "time"
    assert dead["error"]["tool"] == "get_current_time"

    # Exactly one header delta in turn 1, on the request right after the change.
    steps = _header_events_per_step(session)
    headers = {(turn, step): events for turn, step, events in steps}
    assert [e.type for e in headers[(1, 1)]] == ["request/header"]
    assert headers[(1, 2)] == []
    assert [e.type for e in headers[(1, 3)]] == ["request/header-delta"]
    delta = headers[(1, 3)][0].data
    assert list(delta) == ["tools"]
    assert list(delta["tools"]) == ["add"]
    assert [t["name"] for t in delta["tools"]["add"]] == ["dyn__extra"]
    assert delta["tools"]["add"][0]["parameters"]["required"] == ["n"]
    assert headers[(1, 4)] == []
    # The killed server's tools left with one delta at the next step.
    assert [e.data for e in headers[(2, 1)]] == [
        {"tools": {"remove": ["time__convert_time", "time__get_current_time"]}}
    ]
    assert headers[(2, 2)] == []

    # What the model saw, request by request.
    bodies = [r.json() for r in emulator.received]
    assert len(bodies) == 6
    assert _tool_names(bodies[0]) == [
        "dyn__echo",
        "dyn__enable_extra",
        "dyn__picture",
        "dyn__stall",
        "time__convert_time",
        "time__get_current_time",
    ]
    assert "dyn__extra" not in _tool_names(bodies[1])
    assert "dyn__extra" in _tool_names(bodies[2])
    assert not any(n.startswith("time__") for n in _tool_names(bodies[4]))

    assert_bytes_rebuild(session, emulator)
    log = b"".join(e.encode() + b"\n" for e in session.events)
    assert SECRET.encode() not in log
