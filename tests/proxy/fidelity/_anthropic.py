"""The fidelity check for Anthropic Messages bodies through the proxy.

A conversation of client bodies goes through the real proxy app to the
emulator (in process); then, for every request: the upstream body parses
equal to the client's (``stream`` aside: the proxy always streams from the
upstream), the log rebuilds every upstream body byte for byte, and the cache
audit of the session is returned so a test can check that it names a change.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tapelog.audit import CacheReport, cache_report, request_diff
from tapelog.emulator import Emulator
from tapelog.log import decode
from tapelog.log._api import Session

from .._helpers import assert_rebuilds, in_process, post, sessions_in

MODEL = "claude-sonnet-4-5"
TOOL = {
    "name": "add",
    "description": "Add two integers.",
    "input_schema": {"type": "object", "properties": {"a": {"type": "integer"}}},
}


def body(messages: list[Any], **fields: Any) -> dict[str, Any]:
    """A Messages body with the usual required fields."""
    return {"model": MODEL, "max_tokens": 64, "messages": messages, **fields}


@dataclass(frozen=True)
class Carried:
    """What a conversation left: its one session, the cache audit, the upstream."""

    session: Session
    report: CacheReport
    emulator: Emulator

    def causes(self, index: int) -> list[str]:
        """The labels of what ``tapelog cache`` names for request ``index`` (1-based):
        a cause where the cacheable prefix shrank."""
        return [c.label for c in self.report.requests[index - 1].causes]

    def changed(self, index: int) -> dict[str, Any]:
        """What ``tapelog diff`` names between request ``index - 1`` and ``index``:
        every header change, also one that leaves the prompt's tokens as they
        were (a moved cache marker, a beta header)."""
        diff = request_diff(self.session, index - 1, index).to_json()
        header: dict[str, Any] = diff["header"]
        return header


Next = Callable[[Mapping[str, Any]], dict[str, Any]]
"""The next client body, from the previous answer (a message object)."""


async def carry(
    tmp_path: Path,
    first: dict[str, Any],
    *later: Next,
    headers: Mapping[str, str] | Sequence[Mapping[str, str]] = (),
    query: str = "",
    script: list[Any] | None = None,
) -> Carried:
    """Send ``first``, then each ``later`` body built from the previous answer
    (``headers``: for every request, or a list of them, one per request)."""
    each = [headers] * (1 + len(later)) if isinstance(headers, Mapping) else list(headers)
    each = each or [{}] * (1 + len(later))
    sent: list[dict[str, Any]] = []
    async with in_process(tmp_path, provider="anthropic", script=script) as (_, emu, http):
        current, answer = first, {}
        for step, head in zip((None, *later), each, strict=True):
            if step is not None:
                current = step(answer)
            answered = await post(http, f"/v1/messages{query}", current, **head)
            assert answered.status_code == 200, answered.text
            answer = answered.json()
            sent.append(current)
    assert len(emu.received) == len(sent)
    for client, head, upstream in zip(sent, each, emu.received, strict=True):
        theirs = decode(upstream.body)
        assert theirs.pop("stream") is True
        mine = {k: v for k, v in client.items() if k != "stream"}
        assert theirs == mine
        for name, value in head.items():
            assert upstream.headers.get(name) == value
    sessions = sessions_in(tmp_path)
    assert len(sessions) == 1
    assert_rebuilds(sessions, emu)
    (session,) = sessions.values()
    return Carried(session=session, report=cache_report(session), emulator=emu)


def reply(answer: Mapping[str, Any]) -> dict[str, Any]:
    """The answer as the assistant message a client sends back."""
    return {"role": "assistant", "content": answer["content"]}
