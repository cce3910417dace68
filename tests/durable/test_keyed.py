"""A keyed turn runs at most once, whoever runs it how often (tapelog.dbos._keyed).

The crash is a real one as far as the log can tell: a session file cut at the
flush a killed worker made last, then opened again (repair runs when the agent
is made, as in the worker).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tapelog.agent import Agent, tool
from tapelog.dbos import find_keyed_turn, run_keyed_turn
from tapelog.emulator import Emulator
from tapelog.llm import make_client
from tapelog.llm._api import complete_config
from tapelog.log._api import LlmCallConfig, Session
from tapelog.store import JsonlStore, SessionWriter

CALL = {"name": "lookup", "arguments": '{"q": "x"}'}


@contextlib.asynccontextmanager
async def agent_on(
    emu: Emulator, session: Session, writer: SessionWriter, calls: list[str]
) -> AsyncIterator[Agent]:
    @tool
    def lookup(q: str) -> str:
        """Look something up."""
        calls.append(q)
        return "found"

    config = complete_config(LlmCallConfig(provider="emulator", model="emulator-1"))
    async with httpx.AsyncClient(transport=emu.transport(), timeout=30) as http:
        client = make_client(config, http_client=http)
        yield Agent(session, client, config=config, tools=[lookup], writer=writer)


def prompts(session: Session) -> list[str | None]:
    return [e.data.get("idempotency_key") for e in session.events if e.type == "user/message"]


async def test_a_key_already_run_is_only_reported(tmp_path: Path) -> None:
    store, emu, calls = JsonlStore(tmp_path), Emulator(), []
    with store.create(Session("s")) as writer:
        async with agent_on(emu, writer.session, writer, calls) as agent:
            first = await run_keyed_turn(agent, "hello", "k1")
            again = await run_keyed_turn(agent, "hello", "k1")
            other = await run_keyed_turn(agent, "hello", "k2")
    assert first == {
        "key": "k1",
        "turn": 1,
        "last_turn": 1,
        "reason": {"kind": "completed"},
        "text": "ok: hello",
        "ran": "new",
    }
    assert again == first | {"ran": "done"}
    assert other["turn"] == 2
    assert len(emu.received) == 2  # the second run of k1 sent nothing
    session = store.load("s").session
    assert prompts(session) == ["k1", "k2"]  # logged once each, with the prompt


def _cut_after_tool_call(store: JsonlStore, session_id: str) -> None:
    """The file as a worker killed while the tool ran left it: up to the digest
    flushed after the tool/call (the loop flushes before running tools)."""
    path = store.root / f"{session_id}.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    call = next(k for k, line in enumerate(lines) if b'"type":"tool/call"' in line)
    digest = next(k for k in range(call, len(lines)) if b'"type":"log/digest"' in lines[k])
    path.write_bytes(b"".join(lines[: digest + 1]))


async def test_a_turn_cut_in_its_tool_goes_on_from_the_log_and_the_tool_is_not_rerun(
    tmp_path: Path,
) -> None:
    store, calls = JsonlStore(tmp_path), []
    emu = Emulator(script=[{"tool_calls": [CALL]}])
    with store.create(Session("s")) as writer:
        async with agent_on(emu, writer.session, writer, calls) as agent:
            await run_keyed_turn(agent, "look it up", "k1")
    assert calls == ["x"]
    _cut_after_tool_call(store, "s")
    calls.clear()
    session, writer = store.open("s")
    with writer:
        async with agent_on(emu, session, writer, calls) as agent:
            repaired = [e.type for e in agent.repaired]
            found = find_keyed_turn(session, "k1")
            assert found is not None
            assert found.interrupted
            outcome = await run_keyed_turn(agent, "look it up", "k1")
            again = await run_keyed_turn(agent, "look it up", "k1")
    assert repaired == ["tool/result", "step/end", "turn/end"]
    assert calls == []  # the tool the crash cut short was not run again behind the model
    assert outcome["ran"] == "continued"
    assert (outcome["turn"], outcome["last_turn"]) == (1, 2)
    assert outcome["reason"] == {"kind": "completed"}
    assert again == outcome | {"ran": "done"}
    session = store.load("s").session
    assert prompts(session) == ["k1"]
    results = [e for e in session.events if e.type == "tool/result"]
    assert len(results) == 1  # the call is answered once: by repair, as an error
    assert results[0].data["is_error"] is True
    # the continuation turn has no prompt of its own: the model answered the log
    starts = [e.seq for e in session.events if e.type == "turn/start"]
    assert not any(e.type == "user/message" for e in session.events[starts[1] :])
    # what the model saw last: the error result, answered by the default policy
    assert outcome["text"] == "done: 1 tool result " + _sizes(results[0].data["content"])


def _sizes(content: Any) -> str:
    text = content if isinstance(content, str) else "".join(b["text"] for b in content)
    return f"({len(text)} chars)"


def test_an_idempotency_key_must_be_a_non_empty_string() -> None:
    session = Session("s")
    session.append("turn/start", {"turn": 1})
    data = {"content": [{"type": "text", "text": "x"}], "source": {"kind": "user"}}
    from tapelog._errors import EventError

    for bad in ("", 7):
        with pytest.raises(EventError, match="idempotency_key"):
            session.append("user/message", data | {"idempotency_key": bad}, surface_op="append")
    with pytest.raises(EventError, match="idempotency_key"):
        session.append(
            "context/message",
            {"content": data["content"], "source": {"kind": "inject"}, "idempotency_key": "k"},
            surface_op="append",
        )
    session.append("user/message", data | {"idempotency_key": "k"}, surface_op="append")


def test_a_compaction_summary_does_not_end_the_keyed_turns_continuations() -> None:
    session = Session("s")

    def turn(number: int, *messages: dict[str, Any]) -> None:
        session.append("turn/start", {"turn": number})
        for data in messages:
            session.append("user/message", data, surface_op="append")
        session.append("turn/end", {"turn": number, "reason": {"kind": "interrupted"}})

    text = [{"type": "text", "text": "x"}]
    turn(1, {"content": text, "source": {"kind": "user"}, "idempotency_key": "k"})
    turn(2, {"content": text, "source": {"kind": "compaction"}})  # a continuation
    found = find_keyed_turn(session, "k")
    assert found is not None
    assert (found.turn, found.last, found.interrupted) == (1, 2, True)
    turn(3, {"content": text, "source": {"kind": "user"}, "idempotency_key": "k2"})
    found = find_keyed_turn(session, "k")
    assert found is not None
    assert found.last == 2  # the next prompt's turn is not this key's
    assert find_keyed_turn(session, "nope") is None


KINDS = st.sampled_from(["completed", "interrupted", "error", "aborted"])
TURNS = st.lists(
    st.tuples(st.sampled_from(["prompt", "continuation", "compaction"]), KINDS, st.booleans()),
    min_size=1,
    max_size=12,
)


@given(TURNS)
@settings(max_examples=150, deadline=None)
def test_the_keyed_turn_is_its_prompt_turn_and_the_unprompted_turns_after_it(
    turns: list[tuple[str, str, bool]],
) -> None:
    """Against a direct model: every prompt has its own key; a key's turn runs
    from its prompt's turn to the last turn before the next prompt; it is
    interrupted when that last turn ended so (or is still open)."""
    session = Session("s")
    text = [{"type": "text", "text": "x"}]
    model: list[tuple[int, str | None, str | None]] = []  # (turn, key, end kind)
    for number, (what, kind, ended) in enumerate(turns, start=1):
        ended = ended or number < len(turns)  # only the last turn may be open
        session.append("turn/start", {"turn": number})
        key = f"k{number}" if what == "prompt" else None
        source = {"kind": "user" if key else what}
        if what != "continuation":
            data = {"content": text, "source": source} | ({"idempotency_key": key} if key else {})
            session.append("user/message", data, surface_op="append")
        if ended:
            session.append("turn/end", {"turn": number, "reason": {"kind": kind}})
        model.append((number, key, kind if ended else None))
    for k, (number, key, _) in enumerate(model):
        if key is None:
            continue
        chain = [model[k]]
        for later in model[k + 1 :]:
            if later[1] is not None:
                break
            chain.append(later)
        found = find_keyed_turn(session, key)
        assert found is not None
        assert (found.turn, found.last) == (number, chain[-1][0])
        assert found.interrupted == (chain[-1][2] in (None, "interrupted"))
