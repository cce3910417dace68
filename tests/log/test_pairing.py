"""The tool-call pairing rule: on a request's messages and on the log, event by event."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tapelog.emulator._turns import check_openai_turns
from tapelog.log._api import Session, ToolLedger, unanswered_tool_calls


def user(text: str = "hi") -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def asks(*ids: str) -> dict[str, Any]:
    blocks = [{"type": "tool_call", "id": i, "name": "read", "arguments": "{}"} for i in ids]
    return {"role": "assistant", "content": [{"type": "text", "text": "let me look"}, *blocks]}


def result(call_id: str, role: str = "tool") -> dict[str, Any]:
    block = {"type": "tool_result", "tool_call_id": call_id, "content": "ok", "is_error": False}
    return {"role": role, "content": [block]}


def test_answered_calls_pass() -> None:
    messages = [user(), asks("a", "b"), result("b"), result("a"), user("and?"), asks()]
    assert unanswered_tool_calls(messages) == []


def test_a_missing_result_is_named_before_the_next_other_message() -> None:
    assert unanswered_tool_calls([user(), asks("a", "b"), result("a"), user()]) == ["b"]


def test_calls_at_the_end_of_the_request_are_unanswered() -> None:
    assert unanswered_tool_calls([user(), asks("a")]) == ["a"]


def test_the_first_broken_message_is_reported() -> None:
    messages = [asks("a"), user(), asks("b"), user()]
    assert unanswered_tool_calls(messages) == ["a"]


def test_results_in_a_user_message_answer_too() -> None:
    """Some clients (Anthropic's wire) send results as blocks of a user message."""
    assert unanswered_tool_calls([asks("a"), result("a", role="user"), user()]) == []


# --- the same verdict as the provider's own 400 (the emulator's copy of it) ------


def _openai(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The OpenAI chat shape of a neutral message (one tool message per result)."""
    blocks = message["content"]
    if message["role"] == "tool":
        return [{"role": "tool", "tool_call_id": blocks[0]["tool_call_id"], "content": "ok"}]
    if message["role"] == "assistant":
        calls = [{"id": b["id"]} for b in blocks if b["type"] == "tool_call"]
        return [{"role": "assistant", "content": "x", **({"tool_calls": calls} if calls else {})}]
    return [{"role": "user", "content": "x"}]


@st.composite
def conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Well-paired conversations with some results dropped (never an orphan result)."""
    messages: list[dict[str, Any]] = []
    counter = 0
    for _ in range(draw(st.integers(0, 6))):
        messages.append(user())
        for _ in range(draw(st.integers(0, 2))):
            ids = [f"c{counter + k}" for k in range(draw(st.integers(0, 3)))]
            counter += len(ids)
            messages.append(asks(*ids))
            answered = draw(st.permutations(ids))
            keep = draw(st.lists(st.booleans(), min_size=len(ids), max_size=len(ids)))
            messages += [result(i) for i, kept in zip(answered, keep, strict=True) if kept]
    return messages


@given(conversations())
def test_the_rule_agrees_with_the_providers_refusal(messages: list[dict[str, Any]]) -> None:
    wire = [m for message in messages for m in _openai(message)]
    refusal = check_openai_turns(wire, deepseek=False)
    unanswered = unanswered_tool_calls(messages)
    if not unanswered:
        assert refusal is None
    else:
        assert refusal is not None
        assert refusal.endswith(": " + ", ".join(unanswered))


# --- on the log -------------------------------------------------------------------


def _logged() -> Session:
    session = Session("ledger")
    session.append("turn/start", {"turn": 0})
    session.append("step/start", {"turn": 0, "step": 0})
    data = {
        "turn": 0,
        "step": 0,
        "content": asks("a", "b", "c")["content"],
        "source": {"provider": "openai", "model": "m"},
    }
    session.append("assistant/message", data, surface_op="append")
    for call_id in ("a", "b"):
        session.append(
            "tool/call",
            {"turn": 0, "step": 0, "call_id": call_id, "name": "read", "arguments": "{}"},
        )
    return session


def test_the_ledger_follows_calls_from_the_message_to_their_results() -> None:
    session = _logged()
    ledger = ToolLedger().observe_all(session.events)
    assert [(c.call_id, c.asked_at, c.call is not None) for c in ledger.open_calls()] == [
        ("a", 2, True),
        ("b", 2, True),
        ("c", 2, False),
    ]
    answer = {"turn": 0, "step": 0, "call_id": "a", "content": "ok", "is_error": False}
    first = session.append("tool/result", answer, surface_op="append")
    ledger.observe(first)
    assert [c.call_id for c in ledger.asked()] == ["b", "c"]
    # trimming replaces a result that is there: it answers nothing new
    trimmed = session.append(
        "tool/result",
        {**answer, "content": "[trimmed]"},
        surface_op={"op": "replace", "start": first.seq, "end": first.seq},
    )
    ledger.observe(trimmed)
    assert [c.call_id for c in ledger.asked()] == ["b", "c"]


def test_a_call_no_message_asked_for_is_open_but_not_asked() -> None:
    session = Session("hand-written")
    call = session.append(
        "tool/call", {"turn": 0, "step": 0, "call_id": "x", "name": "read", "arguments": "{}"}
    )
    ledger = ToolLedger().observe_all([call])
    assert [(c.call_id, c.asked_at) for c in ledger.open_calls()] == [("x", None)]
    assert ledger.asked() == []
