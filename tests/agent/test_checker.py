"""The invariant checker refuses requests the log cannot explain, before sending."""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any

import pytest

from _unruly import unruly
from tapelog import LogError, ReconstructionError, Session
from tapelog.agent import CompactionPolicy
from tapelog.audit import check_request, rebuild_request_at, rebuild_requests
from tapelog.checker._api import check_enabled
from tapelog.emulator import Emulator
from tapelog.llm import LlmRequest
from tapelog.llm._api import OpenAIWire
from tapelog.log._api import freeze

from ._harness import add, agent_on


async def _logged_session() -> tuple[list, LlmRequest]:
    emulator = Emulator()
    async with agent_on(emulator) as agent:
        await agent.run("one")
        await agent.run("two")
    events = list(agent.session.events)
    last = rebuild_requests(events, session_id=agent.session.id)[-1]
    return events, last.request


async def test_a_faithful_request_passes() -> None:
    events, request = await _logged_session()
    wire = OpenAIWire(dialect="deepseek")
    check_request(events, request, wire.encode_body(request), wire)


async def test_an_extra_message_is_refused_with_a_diff() -> None:
    events, request = await _logged_session()
    wire = OpenAIWire(dialect="deepseek")
    extra = {"role": "user", "content": [{"type": "text", "text": "smuggled"}]}
    forged = replace(request, messages=freeze([*request.messages, extra]))
    with pytest.raises(ReconstructionError, match="messages differ") as info:
        check_request(events, forged, wire.encode_body(forged), wire)
    assert "smuggled" in str(info.value)
    assert "it was not sent" in str(info.value)


async def test_a_changed_header_field_is_named() -> None:
    events, request = await _logged_session()
    wire = OpenAIWire(dialect="deepseek")
    header = replace(request.header, system="a different system prompt")
    forged = replace(request, header=header)
    with pytest.raises(ReconstructionError, match=r"header\.system differs"):
        check_request(events, forged, wire.encode_body(forged), wire)
    config = replace(request.header, config=request.header.config.replace(reasoning_effort="high"))
    with pytest.raises(ReconstructionError, match=r"header\.config differs"):
        check_request(events, replace(request, header=config), wire.encode_body(request), wire)


async def test_different_wire_bytes_are_refused() -> None:
    events, request = await _logged_session()
    wire = OpenAIWire(dialect="deepseek")
    body = wire.encode_body(request).replace(b'"stream":true', b'"stream":true ')
    with pytest.raises(ReconstructionError, match="wire bytes differ"):
        check_request(events, request, body, wire)


class _ImpureWire:
    """A serializer that is not a pure function of the request (a counter leaks in)."""

    name = "impure"

    def __init__(self) -> None:
        self.inner = OpenAIWire(dialect="deepseek")
        self.counter = itertools.count()

    def encode_body(self, request: LlmRequest, cache: object = None) -> bytes:
        body = self.inner.encode_body(request)
        return body[:-1] + f',"n":{next(self.counter)}}}'.encode()


async def test_the_loop_refuses_to_send_what_an_impure_serializer_made() -> None:
    emulator = Emulator()
    async with agent_on(emulator, check=True) as agent:
        agent.client.wire = _ImpureWire()  # type: ignore[misc]
        with pytest.raises(ReconstructionError, match="wire bytes differ"):
            await agent.run("hi")
    assert emulator.received == []
    assert agent.session.events[-1].data["reason"]["kind"] == "error"


async def test_a_boundary_that_is_not_a_step_start_is_refused() -> None:
    events, _ = await _logged_session()
    with pytest.raises(Exception, match="seq 0 is not a step/start event"):
        rebuild_request_at(events, 0)


def test_check_mode_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TAPELOG_CHECK", "1")
    assert check_enabled() is True
    assert check_enabled(False) is False
    monkeypatch.setenv("TAPELOG_CHECK", "0")
    assert check_enabled() is False


def _with_unanswered_calls(session: Session, *, enforced: bool = False) -> None:
    """What the old repair left after a torn tool/call line: an assistant message
    asking for a tool call, then the step and turn closed without its result.

    The session's own rules refuse the next ``step/start`` after it; unless
    ``enforced``, they are only reported from here on, so the checker's rule
    (its defence behind them) is what the test meets."""
    if not enforced:
        unruly(session)
    turn = sum(1 for e in session.events if e.type == "turn/start")
    session.append("turn/start", {"turn": turn})
    session.append(
        "user/message",
        {"content": [{"type": "text", "text": "add"}], "source": {"kind": "user"}},
        surface_op="append",
    )
    session.append("step/start", {"turn": turn, "step": 0})
    session.append(
        "assistant/message",
        {
            "turn": turn,
            "step": 0,
            "content": [{"type": "tool_call", "id": "lost", "name": "add", "arguments": "{}"}],
            "source": {"provider": "deepseek", "model": "deepseek-chat"},
        },
        surface_op="append",
    )
    session.append("step/end", {"turn": turn, "step": 0})
    session.append("turn/end", {"turn": turn, "reason": {"kind": "interrupted"}})


async def test_a_request_with_unanswered_tool_calls_is_refused_before_it_leaves() -> None:
    emulator = Emulator()
    async with agent_on(emulator) as agent:
        await agent.run("one")
    _with_unanswered_calls(agent.session)
    sent = len(emulator.received)
    async with agent_on(emulator, session=agent.session, check=True) as again:
        with pytest.raises(ReconstructionError, match=r"tool calls without their results \(lost\)"):
            await again.run("two")
    assert len(emulator.received) == sent  # the provider never saw it
    end = [e for e in again.session.events if e.type == "step/end"][-1]
    assert end.data["sent"] is False
    assert "without their results" in end.data["error"]["message"]


async def test_the_logs_rules_refuse_the_step_before_the_checker_sees_it() -> None:
    emulator = Emulator()
    async with agent_on(emulator) as agent:
        await agent.run("one")
    _with_unanswered_calls(agent.session, enforced=True)
    sent, logged = len(emulator.received), len(agent.session)
    async with agent_on(emulator, session=agent.session, check=True) as again:
        with pytest.raises(LogError, match=r"this step's request would hold tool calls without"):
            await again.run("two")
    assert len(emulator.received) == sent  # the provider never saw it
    types = [e.type for e in again.session.events[logged:]]
    assert types == ["turn/start", "user/message", "turn/end"]  # no step/start was logged
    assert again.session.events[-1].data["reason"]["kind"] == "error"


async def test_a_summary_call_with_unanswered_tool_calls_is_refused_before_it_leaves() -> None:
    emulator = Emulator()
    async with agent_on(emulator) as agent:
        await agent.run("one")
    _with_unanswered_calls(agent.session)
    agent.inject("a note after it")  # so the region to summarise holds the unanswered call
    sent = len(emulator.received)
    policy = CompactionPolicy(keep_messages=1)
    async with agent_on(emulator, session=agent.session, check=True, compaction=policy) as again:
        with pytest.raises(ReconstructionError, match=r"summary request .* \(lost\)"):
            await again.compact()
    assert len(emulator.received) == sent
    end = again.session.events[-1]
    assert (end.type, end.data["sent"]) == ("compact/end", False)


async def test_unchecked_the_same_request_is_the_providers_400() -> None:
    """What the checker spares the user: the provider's refusal, on every later request."""
    emulator = Emulator()
    async with agent_on(emulator) as agent:
        await agent.run("one")
    _with_unanswered_calls(agent.session)
    async with agent_on(emulator, session=agent.session, check=False) as again:
        result = await again.run("two")
    assert result.reason["error"]["status"] == 400
    assert "must be followed by tool messages" in result.reason["error"]["message"]


async def test_the_pairing_check_scans_only_what_is_new(monkeypatch: pytest.MonkeyPatch) -> None:
    """A step's check costs what is new: the rule is not re-run over the whole history."""
    import tapelog.checker._checker as checker_module

    scanned: list[int] = []
    rule = checker_module.unanswered_tool_calls

    def counting(messages: Any) -> list[str]:
        listed = list(messages)
        scanned.append(len(listed))
        return rule(listed)

    monkeypatch.setattr(checker_module, "unanswered_tool_calls", counting)
    calls = {"tool_calls": [{"name": "add", "arguments": '{"a": 1, "b": 2}'}]}
    emulator = Emulator(script=[calls, {"text": "3"}] * 6)
    async with agent_on(emulator, tools=[add], check=True) as agent:
        for n in range(6):
            await agent.run(f"add, round {n}")
    history = len(agent.session.derive_messages())
    assert len(scanned) == 12
    assert history == 24
    # the first check sees the whole (short) history, later ones what was appended
    assert max(scanned[1:]) <= 3, scanned
    # ... and every message of the last request was scanned once (all but the final answer)
    assert sum(scanned) == history - 1, scanned
