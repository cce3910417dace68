"""Carry, never reshape: a client body through the proxy, checked three ways.

Each fidelity test posts one or more chat completions bodies through the real
proxy app to the emulator (in process) and checks that the upstream body
parses equal to the client's (the one allowed difference: the proxy always
asks for a stream with usage, docs/proxy.md), that every body the emulator
received is rebuilt byte for byte from the stored log, and returns the
sessions and the audit so a test can check that a change is named.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tapelog.audit import cache_report
from tapelog.emulator import Emulator
from tapelog.log import decode
from tapelog.log._api import Session

from .._helpers import assert_rebuilds, in_process, post, sessions_in

CHAT = "/v1/chat/completions"
MODEL = "gpt-4o-mini"
OWN = ("stream", "stream_options")
"""The members the proxy sets itself (the upstream always streams, with usage)."""


@dataclass
class Carried:
    """What a run left: the answers, the emulator, the one session, its log."""

    answers: list[httpx.Response]
    emulator: Emulator
    session: Session

    def causes(self, request: int) -> list[dict[str, Any]]:
        """The cache audit's causes for request ``request`` (1-based) as JSON."""
        rows = cache_report(self.session).requests
        return [c.to_json() for c in rows[request - 1].causes]


def without_own(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k not in OWN}


def assert_carried(client: dict[str, Any], upstream: dict[str, Any]) -> None:
    """The upstream body is the client's, member for member (the proxy's own aside)."""
    assert without_own(upstream) == without_own(client)
    assert upstream["stream"] is True
    assert upstream["stream_options"]["include_usage"] is True


async def carry(
    tmp_path: Path,
    bodies: Sequence[dict[str, Any]],
    *,
    script: list[Any] | None = None,
    provider: str = "openai",
) -> Carried:
    """Post ``bodies`` in order; every one is answered 200 and carried exactly."""
    answers: list[httpx.Response] = []
    async with in_process(tmp_path, provider=provider, script=script) as (_, emu, http):
        for body in bodies:
            answer = await post(http, CHAT, body)
            assert answer.status_code == 200, answer.text
            answers.append(answer)
    assert len(emu.received) == len(bodies)
    for body, got in zip(bodies, emu.received, strict=True):
        assert_carried(body, decode(got.body))
    sessions = sessions_in(tmp_path)  # each one verifies
    assert_rebuilds(sessions, emu)
    assert len(sessions) == 1, sorted(sessions)
    (session,) = sessions.values()
    return Carried(answers, emu, session)


def after(body: dict[str, Any], answer: httpx.Response, *more: dict[str, Any]) -> dict[str, Any]:
    """``body`` continued: the answer's message (choice 0), then ``more`` messages."""
    message = answer.json()["choices"][0]["message"]
    kept = {k: v for k, v in message.items() if v is not None and k != "annotations"}
    return {**body, "messages": [*body["messages"], kept, *more]}


async def carry_two(
    tmp_path: Path,
    first: dict[str, Any],
    change: Callable[[dict[str, Any]], dict[str, Any]],
    *,
    script: list[Any] | None = None,
) -> Carried:
    """``first``, then the request that continues it (its answer and one more
    user message) with ``change`` applied; both carried exactly, one session."""
    async with in_process(tmp_path, provider="openai", script=script) as (_, emu, http):
        answer = await post(http, CHAT, first)
        assert answer.status_code == 200, answer.text
        second = change(after(first, answer, {"role": "user", "content": "more"}))
        again = await post(http, CHAT, second)
        assert again.status_code == 200, again.text
    for body, got in zip([first, second], emu.received, strict=True):
        assert_carried(body, decode(got.body))
    sessions = sessions_in(tmp_path)
    assert_rebuilds(sessions, emu)
    assert len(sessions) == 1, sorted(sessions)
    return Carried([answer, again], emu, next(iter(sessions.values())))
