"""The invariant checker refuses requests the log cannot explain, before sending."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from tapelog import ReconstructionError
from tapelog.audit import check_request, rebuild_request_at, rebuild_requests
from tapelog.checker._api import check_enabled
from tapelog.emulator import Emulator
from tapelog.llm import LlmRequest
from tapelog.llm._api import OpenAIWire
from tapelog.log._api import freeze

from ._harness import agent_on


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
