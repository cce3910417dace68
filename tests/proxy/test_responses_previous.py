"""``previous_response_id`` through the proxy: carried as sent, and the log
says where the earlier part of the prompt is (which session and turn logged
that response, or that it lives only on the provider). A request that
continues a session's last response continues that session."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from openai import AsyncOpenAI

from tapelog.cli import cli
from tapelog.emulator import Emulator
from tapelog.log import decode

from ._helpers import SECRET, assert_rebuilds, serve, sessions_in
from ._responses_helpers import assert_carried, recorded_proxy

TOOLS: list[Any] = [
    {"type": "function", "name": "add", "parameters": {"type": "object", "properties": {}}}
]
SCRIPT = [{"reasoning": "Add.", "tool_calls": [{"name": "add", "arguments": "{}"}]}, {"text": "3"}]


def _ends(store: Path) -> dict[str, Any]:
    """Each session's last turn/end reason."""
    return {
        sid: [e.data["reason"] for e in s.events if e.type == "turn/end"][-1]
        for sid, s in sessions_in(store).items()
    }


async def test_a_continued_response_continues_its_session(tmp_path: Path) -> None:
    emu = Emulator(script=SCRIPT)
    store, lines = tmp_path / "sessions", []
    with serve(emu.app) as port, recorded_proxy(store, port, lines) as (proxy_port, recording):
        client = AsyncOpenAI(base_url=f"http://127.0.0.1:{proxy_port}/v1", api_key=SECRET)
        first = await client.responses.create(model="gpt-5", input="add", tools=TOOLS)
        call = first.output[1]
        assert call.type == "function_call"
        output = {"type": "function_call_output", "call_id": call.call_id, "output": "3"}
        second = await client.responses.create(
            model="gpt-5", previous_response_id=first.id, input=[output], tools=TOOLS
        )
        await client.close()
    assert second.output_text == "3"
    assert_carried(recording.bodies, emu)
    sessions = sessions_in(store)
    assert_rebuilds(sessions, emu)
    (session_id,) = sessions
    session = sessions[session_id]
    reasons = [e.data["reason"] for e in session.events if e.type == "turn/end"]
    assert [r["response_id"] for r in reasons] == [first.id, second.id]
    assert reasons[1]["previous_response"] == {"id": first.id, "session": session_id, "turn": 1}
    assert f"continues {first.id} (logged in {session_id} turn 1)" in lines[1]
    # The call's output is the answer to the logged call, not an opaque item.
    (result,) = [e for e in session.events if e.type == "tool/result"]
    assert result.data["call_id"] == call.call_id
    assert result.data["content"] == "3"


async def test_a_chain_of_responses_is_one_session_that_verifies(tmp_path: Path) -> None:
    """The official SDK chains three turns by ``previous_response_id`` with the
    provider storing them: one session, each body rebuilt byte for byte from
    the log, ``verify`` clean. Continuing an older response than a session's
    last starts a new session linked to it."""
    emu = Emulator(script=[{"text": "one"}, {"text": "two"}, {"text": "three"}, {"text": "b"}])
    store, lines = tmp_path / "sessions", []
    with serve(emu.app) as port, recorded_proxy(store, port, lines) as (proxy_port, recording):
        client = AsyncOpenAI(base_url=f"http://127.0.0.1:{proxy_port}/v1", api_key=SECRET)
        answers = [await client.responses.create(model="gpt-5", input="hi", store=True)]
        for text in ("more", "again"):
            async with client.responses.stream(
                model="gpt-5", input=text, store=True, previous_response_id=answers[-1].id
            ) as stream:
                answers.append(await stream.get_final_response())
        branch = await client.responses.create(
            model="gpt-5", input="other", store=True, previous_response_id=answers[0].id
        )
        await client.close()
    assert [a.output_text for a in [*answers, branch]] == ["one", "two", "three", "b"]
    assert emu.received[2].json()["input"] == "again"  # only the new input, as sent
    assert_carried(recording.bodies, emu)
    sessions = sessions_in(store)
    assert_rebuilds(sessions, emu)
    ends = {
        sid: [e.data["reason"] for e in s.events if e.type == "turn/end"]
        for sid, s in sessions.items()
    }
    (chained,) = [sid for sid in ends if len(ends[sid]) == 3]
    (branched,) = [sid for sid in ends if sid != chained]
    assert [r["response_id"] for r in ends[chained]] == [a.id for a in answers]
    assert ends[branched][0]["previous_response"] == {
        "id": answers[0].id,
        "session": chained,
        "turn": 1,
    }
    assert len(sessions[chained].history()) == 6  # the whole prompt the model saw
    for sid in sessions:
        verified = CliRunner().invoke(cli, ["verify", sid, "--store", str(store)])
        assert verified.exit_code == 0, verified.output


async def test_a_response_the_log_lacks_is_named_as_the_providers(tmp_path: Path) -> None:
    emu = Emulator(script=SCRIPT)
    store, lines = tmp_path / "sessions", []
    with serve(emu.app) as port, recorded_proxy(store, port, lines) as (proxy_port, recording):
        direct = AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/openai/v1", api_key=SECRET)
        first = await direct.responses.create(model="gpt-5", input="add", tools=TOOLS)
        await direct.close()
        call = first.output[1]
        assert call.type == "function_call"
        client = AsyncOpenAI(base_url=f"http://127.0.0.1:{proxy_port}/v1", api_key=SECRET)
        output = {"type": "function_call_output", "call_id": call.call_id, "output": "3"}
        async with client.responses.stream(
            model="gpt-5", previous_response_id=first.id, input=[output], tools=TOOLS
        ) as stream:
            second = await stream.get_final_response()
        await client.close()
    assert second.output_text == "3"
    (session_id,) = sessions_in(store)
    reason = _ends(store)[session_id]
    assert reason["previous_response"] == {"id": first.id, "in_log": False}
    assert reason["response_id"] == second.id
    assert "the earlier part of the prompt lives only on the provider" in lines[0]
    (sent,) = recording.bodies
    upstream = emu.received[1].json()
    assert upstream == decode(sent)  # previous_response_id carried as sent
    assert upstream["previous_response_id"] == first.id


@pytest.mark.parametrize("index", ["kept", "rebuilt"])
async def test_another_replica_finds_the_response_the_first_logged(
    tmp_path: Path, index: str
) -> None:
    """The map from response id to session lives in the store: a second proxy on
    the same store (a replica, or the first one restarted) names where it is
    and continues that session, also when the store's index is gone and
    rebuilt from the sessions' logs."""
    emu = Emulator(script=SCRIPT)
    store, lines = tmp_path / "sessions", []
    with serve(emu.app) as port:
        with recorded_proxy(store, port, lines) as (first_port, _):
            client = AsyncOpenAI(base_url=f"http://127.0.0.1:{first_port}/v1", api_key=SECRET)
            first = await client.responses.create(model="gpt-5", input="add", tools=TOOLS)
            await client.close()
        call = first.output[1]
        assert call.type == "function_call"
        output = {"type": "function_call_output", "call_id": call.call_id, "output": "3"}
        if index == "rebuilt":
            (store / ".index" / "points.jsonl").unlink()
        with recorded_proxy(store, port, lines) as (second_port, _):
            client = AsyncOpenAI(base_url=f"http://127.0.0.1:{second_port}/v1", api_key=SECRET)
            second = await client.responses.create(
                model="gpt-5", previous_response_id=first.id, input=[output], tools=TOOLS
            )
            await client.close()
    assert second.output_text == "3"
    ((session_id, session),) = sessions_in(store).items()  # continued there
    reasons = [e.data["reason"] for e in session.events if e.type == "turn/end"]
    assert [r["response_id"] for r in reasons] == [first.id, second.id]
    assert reasons[1]["previous_response"] == {"id": first.id, "session": session_id, "turn": 1}
    assert f"continues {first.id} (logged in {session_id} turn 1)" in lines[1]


class _Gate:
    """An ASGI app in front of the emulator that holds its second POST until
    :attr:`release` is set, and says when that request arrived."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.posts = 0
        self.arrived, self.release = threading.Event(), threading.Event()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            self.posts += 1
            if self.posts == 2:
                self.arrived.set()
                await asyncio.to_thread(self.release.wait, 10)
        await self.app(scope, receive, send)


async def test_a_response_whose_session_is_busy_starts_a_linked_session(tmp_path: Path) -> None:
    """Two requests that continue the same last response at once: the first
    continues the session, the other (its session busy) is a new session whose
    turn names where the response is logged."""
    emu = Emulator(script=[{"text": "one"}, {"text": "two"}, {"text": "three"}])
    gate = _Gate(emu.app)
    store, lines = tmp_path / "sessions", []
    with serve(gate) as port, recorded_proxy(store, port, lines) as (proxy_port, _):
        client = AsyncOpenAI(base_url=f"http://127.0.0.1:{proxy_port}/v1", api_key=SECRET)
        first = await client.responses.create(model="gpt-5", input="hi", store=True)
        held = asyncio.ensure_future(
            client.responses.create(
                model="gpt-5", input="a", store=True, previous_response_id=first.id
            )
        )
        assert await asyncio.to_thread(gate.arrived.wait, 10)
        other = await client.responses.create(
            model="gpt-5", input="b", store=True, previous_response_id=first.id
        )
        gate.release.set()
        slow = await held
        await client.close()
    # the one held upstream is answered last
    assert (other.output_text, slow.output_text) == ("two", "three")
    sessions = sessions_in(store)
    assert_rebuilds(sessions, emu)
    ends = {
        sid: [e.data["reason"] for e in s.events if e.type == "turn/end"]
        for sid, s in sessions.items()
    }
    (continued,) = [sid for sid in ends if len(ends[sid]) == 2]
    (linked,) = [sid for sid in ends if sid != continued]
    assert ends[continued][1]["response_id"] == slow.id
    assert ends[linked][0]["response_id"] == other.id
    assert ends[linked][0]["previous_response"] == {
        "id": first.id,
        "session": continued,
        "turn": 1,
    }
