"""Budgets: tokens, requests and cost per turn and per session.

A budget is checked between requests, never during one: when a limit is
reached the turn ends with ``turn/end`` ``{"kind": "budget", ...}`` naming it,
and every request that was sent still rebuilds byte for byte.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tapelog import EventError, JsonlStore, Session, TapelogError
from tapelog.agent import Agent, Budget, Limits, Price
from tapelog.emulator import Emulator

from ._harness import add, agent_on, assert_bytes_rebuild

ADD = {"tool_calls": [{"name": "add", "arguments": '{"a": 1, "b": 2}'}]}


def _ends(session: Session) -> list[Any]:
    return [e.data["reason"] for e in session.events if e.type == "turn/end"]


def _usage(session: Session, turn: int | None = None) -> dict[str, int]:
    total = {"prompt": 0, "output": 0}
    for e in session.events:
        if e.type == "assistant/message" and (turn is None or e.data["turn"] == turn):
            u = e.data.get("usage") or {}
            total["prompt"] += u.get("input", 0) + u.get("cache_read", 0) + u.get("cache_write", 0)
            total["output"] += u.get("output", 0)
    return total


async def test_a_turn_request_budget_ends_the_turn_between_requests(tmp_path: Path) -> None:
    emulator = Emulator(script=[ADD, ADD, ADD, {"text": "done"}, {"text": "next"}])
    budget = Budget(turn=Limits(requests=2))
    async with agent_on(emulator, tools=[add], budget=budget) as agent:
        first = await agent.run("keep adding")
        second = await agent.run("again")  # a turn budget starts afresh each turn
    assert dict(first.reason) == {
        "kind": "budget",
        "scope": "turn",
        "limit": "requests",
        "max": 2,
        "used": 2,
    }
    assert first.steps == 2
    assert not first.ok
    assert second.ok
    assert len(emulator.received) == 4
    assert_bytes_rebuild(agent.session, emulator)
    # The log with its budget end loads (every structural rule holds) and rebuilds.
    store = JsonlStore(tmp_path)
    with store.create(agent.session):
        pass
    assert_bytes_rebuild(store.load(agent.session.id).session, emulator)


async def test_a_session_token_budget_stops_the_next_turn_before_it_sends() -> None:
    emulator = Emulator(script=[{"text": "one"}, {"text": "two"}])
    budget = Budget(session=Limits(total_tokens=1))
    async with agent_on(emulator, budget=budget) as agent:
        first = await agent.run("hello")
        second = await agent.run("more")
    assert first.ok  # nothing was used before its one request
    spent = _usage(agent.session)
    assert dict(second.reason) == {
        "kind": "budget",
        "scope": "session",
        "limit": "total_tokens",
        "max": 1,
        "used": spent["prompt"] + spent["output"],
    }
    assert second.steps == 0
    assert len(emulator.received) == 1
    assert_bytes_rebuild(agent.session, emulator)


@pytest.mark.parametrize(
    ("limits", "limit"),
    [
        (Limits(input_tokens=1), "input_tokens"),
        (Limits(output_tokens=1), "output_tokens"),
    ],
)
async def test_input_and_output_token_limits(limits: Limits, limit: str) -> None:
    emulator = Emulator(script=[ADD, ADD, {"text": "done"}])
    async with agent_on(emulator, tools=[add], budget=Budget(turn=limits)) as agent:
        result = await agent.run("add")
    spent = _usage(agent.session)
    used = spent["prompt"] if limit == "input_tokens" else spent["output"]
    assert dict(result.reason) == {
        "kind": "budget",
        "scope": "turn",
        "limit": limit,
        "max": 1,
        "used": used,
    }
    assert len(emulator.received) == 1
    assert_bytes_rebuild(agent.session, emulator)


async def test_cost_comes_from_the_pricing_table_the_user_gives() -> None:
    emulator = Emulator(script=[ADD, ADD, ADD, {"text": "done"}])
    # One dollar per million prompt tokens, two per million output tokens.
    price = Price(input=1.0, output=2.0)
    budget = Budget(turn=Limits(cost=1e-9), pricing={"deepseek:deepseek-chat": price})
    async with agent_on(emulator, tools=[add], budget=budget) as agent:
        result = await agent.run("add")
    u = next(e.data["usage"] for e in agent.session.events if e.type == "assistant/message")
    expected = (
        (u["input"] + u["cache_read"] + u["cache_write"]) * 1.0 + u["output"] * 2.0
    ) / 1_000_000
    assert result.reason["kind"] == "budget"
    assert result.reason["limit"] == "cost"
    assert result.reason["used"] == pytest.approx(expected)
    assert len(emulator.received) == 1


def test_the_default_table_prices_cache_reads_apart() -> None:
    price = Price(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75)
    usage = {"input": 1_000_000, "cache_read": 1_000_000, "cache_write": 0, "output": 0}
    assert price.cost(usage) == pytest.approx(3.3)
    assert Price(input=1.0, output=1.0).cost({"cache_read": 1_000_000}) == pytest.approx(1.0)


def test_a_cost_budget_without_a_price_is_refused_at_once() -> None:
    with pytest.raises(TapelogError, match="no price for emulator:emulator-1"):
        Agent("emulator", budget=Budget(session=Limits(cost=1.0)))


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValueError, match="requests"):
        Limits(requests=0)
    with pytest.raises(ValueError, match="cost"):
        Limits(cost=-1.0)


@pytest.mark.parametrize(
    "reason",
    [
        {"kind": "budget", "limit": "requests", "max": 1, "used": 1},
        {"kind": "budget", "scope": "week", "limit": "requests", "max": 1, "used": 1},
        {"kind": "budget", "scope": "turn", "max": 1, "used": 1},
        {"kind": "budget", "scope": "turn", "limit": "requests", "max": "1", "used": 1},
        {"kind": "budget", "scope": "turn", "limit": "cost", "max": 1.0, "used": -0.5},
    ],
)
def test_the_log_refuses_a_malformed_budget_end(reason: dict[str, Any]) -> None:
    session = Session()
    session.append("turn/start", {"turn": 1})
    with pytest.raises(EventError, match="budget end"):
        session.append("turn/end", {"turn": 1, "reason": reason})
    session.append(
        "turn/end",
        {
            "turn": 1,
            "reason": {"kind": "budget", "scope": "turn", "limit": "cost", "max": 0.5, "used": 0.6},
        },
    )


def test_a_known_model_is_priced_from_the_dated_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key-1234")
    agent = Agent("openai:gpt-4.1-mini", budget=Budget(session=Limits(cost=1.0)))
    assert agent.config.model == "gpt-4.1-mini"  # accepted: the default table prices it
    assert Budget.DEFAULT_PRICES["openai:gpt-4.1-mini"].output == 1.6


def test_a_session_budget_counts_what_earlier_processes_spent(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    budget = Budget(session=Limits(requests=2))
    with Agent.open(store, "long", model="emulator", budget=budget) as agent:
        assert agent.run_sync("one").ok
        assert agent.run_sync("two").ok
    # A new process: the budget is read from the stored log, not from memory.
    with Agent.open(store, "long", model="emulator", budget=budget) as agent:
        third = agent.run_sync("three")
    assert dict(third.reason) == {
        "kind": "budget",
        "scope": "session",
        "limit": "requests",
        "max": 2,
        "used": 2,
    }
    assert third.steps == 0
