"""``Agent.open(store, id, ...)``: one call that creates a stored session or resumes it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tapelog import JsonlStore, Session, TapelogError, rebuild_requests
from tapelog.agent import Agent


def test_open_creates_then_resumes_and_says_which(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    with Agent.open(store, "chat-1", model="emulator", system="Be brief.") as agent:
        assert agent.opened == "created"
        assert agent.run_sync("first").ok
    with Agent.open(store, "chat-1", model="emulator", system="Be brief.") as agent:
        assert agent.opened == "resumed"
        assert agent.repaired == []
        second = agent.run_sync("second")
        assert second.turn == 2
        assert second.ok
    stored = store.load("chat-1").session
    turns = [e.data["turn"] for e in stored.events if e.type == "turn/end"]
    assert turns == [1, 2]
    # The second turn's request holds the first turn: it resumed, it did not start over.
    last = rebuild_requests(stored)[-1].request
    assert len(last.messages) == 3


def test_open_repairs_an_interrupted_turn(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    session = Session("crashed")
    with store.create(session) as writer:
        session.append("turn/start", {"turn": 1})
        session.append(
            "user/message",
            {"content": [{"type": "text", "text": "lost"}], "source": {"kind": "user"}},
            surface_op="append",
        )
        writer.flush()
    with Agent.open(store, "crashed", model="emulator") as agent:
        assert agent.opened == "resumed"
        assert [e.type for e in agent.repaired] == ["turn/end"]
        assert agent.run_sync("again").turn == 2
    stored = store.load("crashed").session
    assert [e.data["reason"]["kind"] for e in stored.events if e.type == "turn/end"] == [
        "interrupted",
        "completed",
    ]


def test_close_releases_the_session_for_another_writer(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    agent = Agent.open(store, "s", model="emulator")
    agent.run_sync("hi")
    agent.close()
    agent.close()  # idempotent
    again = Agent.open(store, "s", model="emulator")
    assert again.opened == "resumed"
    again.close()


def test_a_bad_model_string_stores_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    store = JsonlStore(tmp_path)
    with pytest.raises(TapelogError, match="OPENAI_API_KEY"):
        Agent.open(store, "never", model="openai:gpt-4.1-mini")
    assert not store.exists("never")
    assert store.reserve("never") is not None  # and the id is not locked
