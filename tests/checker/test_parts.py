"""The checker compares what is new, and still catches any change to what is old.

The loop hands the checker the body as the wire's parts (:class:`WireBody`);
the checker skips the parts it verified on an earlier step (the same objects
on both sides: immutable bytes) and compares the rest by content. These tests
grow a session whose history is several sealed segments, then forge the body
of a later step -- a byte changed in an old part, two parts swapped, a part
dropped, a header part changed -- and the checker refuses each before it is
sent, on every wire.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agent._harness import agent_on
from tapelog import ReconstructionError
from tapelog.agent import tool
from tapelog.emulator import Emulator
from tapelog.llm import LlmRequest
from tapelog.llm._api import BodyCache
from tapelog.llm._pieces import SEGMENT_BYTES, Parts

BLOB = 30_000  # one tool result: a few of them seal a history segment


@tool
def blob(n: int) -> str:
    """A long note.

    Args:
        n: Which note.
    """
    return f"note {n}: " + "abcdefghij" * (BLOB // 10)


# provider, config options: the three wire families
_WIRES: dict[str, tuple[str, dict[str, Any]]] = {
    "chat": ("deepseek", {}),
    "anthropic": ("anthropic", {}),
    "responses": ("openai", {"wire": {"api": "responses"}}),
}

Forge = Callable[[Parts], Parts]


class _ForgingWire:
    """The client's own wire, whose parts are forged on one call (a buggy cache,
    a serializer with a side channel: what the checker exists to catch)."""

    name = "forging"

    def __init__(self, inner: Any, at: int, forge: Forge) -> None:
        self.inner, self.at, self.forge = inner, at, forge
        self.calls = 0

    def encode_parts(self, request: LlmRequest, *, cache: BodyCache | None = None) -> Parts:
        parts: Parts = self.inner.encode_parts(request, cache=cache)
        self.calls += 1
        if self.calls == self.at:
            forged = self.forge(list(parts))
            assert b"".join(forged) != b"".join(parts), "the forge must change the bytes"
            return forged
        return parts

    def encode_body(self, request: LlmRequest, *, cache: BodyCache | None = None) -> bytes:
        return b"".join(self.encode_parts(request, cache=cache))


def _old_segment(parts: Parts) -> int:
    """The first sealed history segment (a part verified on earlier steps)."""
    return next(i for i, p in enumerate(parts) if len(p) >= SEGMENT_BYTES)


def _change_a_byte(parts: Parts) -> Parts:
    i = _old_segment(parts)
    at = parts[i].index(b"abcdefghij") + 3
    parts[i] = parts[i][:at] + b"X" + parts[i][at + 1 :]
    return parts


def _swap(parts: Parts) -> Parts:
    i = _old_segment(parts)
    j = next(k for k in range(i + 1, len(parts)) if len(parts[k]) >= BLOB and parts[k] != parts[i])
    parts[i], parts[j] = parts[j], parts[i]
    return parts


def _drop(parts: Parts) -> Parts:
    del parts[_old_segment(parts)]
    return parts


def _header(parts: Parts) -> Parts:
    i = next(i for i, p in enumerate(parts) if b'"model"' in p)
    parts[i] = parts[i].replace(b'"model"', b'"modeL"')
    return parts


FORGES: dict[str, Forge] = {
    "a changed byte in an old part": _change_a_byte,
    "two parts swapped": _swap,
    "a dropped part": _drop,
    "a changed header part": _header,
}

STEPS = 7  # the forged request is the last: six bodies were verified before it


@pytest.mark.parametrize("wire", sorted(_WIRES))
@pytest.mark.parametrize("forge", sorted(FORGES))
async def test_a_forged_part_of_a_later_step_is_caught(wire: str, forge: str) -> None:
    provider, options = _WIRES[wire]
    calls = [{"tool_calls": [{"name": "blob", "arguments": f'{{"n": {n}}}'}]} for n in range(9)]
    emulator = Emulator(script=calls)
    async with agent_on(
        emulator, provider=provider, config=options, tools=[blob], check=True, max_steps=20
    ) as agent:
        forging = _ForgingWire(agent.client.wire, STEPS, FORGES[forge])
        agent.client.wire = forging  # type: ignore[misc]
        with pytest.raises(ReconstructionError, match=r"wire bytes differ|header"):
            await agent.run("read the notes")
    assert forging.calls == STEPS
    assert len(emulator.received) == STEPS - 1  # the forged body was never sent
    assert agent.session.events[-1].data["reason"]["kind"] == "error"


@pytest.mark.parametrize("wire", sorted(_WIRES))
async def test_a_check_compares_only_what_is_new(wire: str) -> None:
    provider, options = _WIRES[wire]
    calls = [{"tool_calls": [{"name": "blob", "arguments": f'{{"n": {n}}}'}]} for n in range(12)]
    emulator = Emulator(script=[*calls, {"text": "done"}])
    async with agent_on(
        emulator, provider=provider, config=options, tools=[blob], check=True, max_steps=20
    ) as agent:
        checker = agent._checker
        assert checker is not None
        compared: list[tuple[int, int]] = []
        original = checker.check

        def check(request: LlmRequest, body: Any) -> None:
            original(request, body)
            compared.append((checker.compared_bytes, len(body)))

        checker.check = check  # type: ignore[method-assign]
        result = await agent.run("read the notes")
    assert result.ok, result.reason
    assert len(compared) == 13
    body_bytes = compared[-1][1]
    assert body_bytes > 12 * BLOB
    # Each step compares what is new: its new messages, the header members, a
    # freshly sealed segment and (Anthropic) the last groups, whose breakpoints
    # move; a bound that does not grow with the history, which the body does.
    assert max(c for c, _ in compared) <= 6 * BLOB, compared
    assert compared[-1][0] < body_bytes / 2, compared
