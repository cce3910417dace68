"""Cache writes by TTL: ``cache_creation`` splits what a request wrote into the
5-minute and the 1-hour cache, by the ``ttl`` of the breakpoints that wrote it."""

from __future__ import annotations

from typing import Any

import httpx

from tapelog.emulator import Emulator

from ._helpers import BASE

BIG = "word " * 1500  # well over the 1024-token minimum


def _body(system_ttl: str | None, tail_ttl: str | None) -> dict[str, Any]:
    def mark(ttl: str | None) -> dict[str, Any]:
        return {"type": "ephemeral", **({"ttl": ttl} if ttl else {})}

    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 16,
        "system": [{"type": "text", "text": BIG, "cache_control": mark(system_ttl)}],
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": BIG + "?", "cache_control": mark(tail_ttl)}],
            }
        ],
    }


async def _usage(body: dict[str, Any]) -> dict[str, Any]:
    emu = Emulator()
    async with httpx.AsyncClient(transport=emu.transport(), base_url=BASE) as client:
        answered = await client.post("/v1/messages", json=body)
    assert answered.status_code == 200, answered.text
    usage: dict[str, Any] = answered.json()["usage"]
    return usage


async def test_default_markers_write_to_the_five_minute_cache() -> None:
    usage = await _usage(_body(None, "5m"))
    written = usage["cache_creation_input_tokens"]
    assert written > 2000
    assert usage["cache_creation"] == {
        "ephemeral_5m_input_tokens": written,
        "ephemeral_1h_input_tokens": 0,
    }


async def test_a_one_hour_marker_writes_its_prefix_to_the_hour_cache() -> None:
    usage = await _usage(_body("1h", None))
    creation = usage["cache_creation"]
    hour, five = creation["ephemeral_1h_input_tokens"], creation["ephemeral_5m_input_tokens"]
    assert hour > 1000  # the system prompt, for an hour
    assert five > 1000  # the rest, for 5 minutes
    assert hour + five == usage["cache_creation_input_tokens"]
    everything = await _usage(_body("1h", "1h"))
    assert everything["cache_creation"]["ephemeral_5m_input_tokens"] == 0
