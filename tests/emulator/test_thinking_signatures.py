"""Signed thinking blocks: what the emulator signs comes back intact, or the API's 400.

The real API refuses a thinking block sent back with its text or signature
changed in any way: ``messages.1.content.0: Invalid `signature` in `thinking`
block`` (anthropics/claude-code#10627, anthropics/anthropic-sdk-python#1598).
The emulator signs its thinking with a digest of the text and checks its own
signatures the same way, so a proxy that reshapes a thinking block fails here
as it would against the API.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from proxy._helpers import assert_rebuilds, in_process, post, sessions_in
from tapelog.emulator import Emulator
from tapelog.log import decode

from ._helpers import BASE

ASK = {"role": "user", "content": "think"}


def _body(messages: list[Any]) -> dict[str, Any]:
    return {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": messages}


async def _first(client: httpx.AsyncClient) -> list[Any]:
    answer = await client.post("/anthropic/v1/messages", json=_body([ASK]))
    assert answer.status_code == 200
    blocks: list[Any] = answer.json()["content"]
    return blocks


async def test_a_signed_thinking_block_sent_back_intact_is_accepted() -> None:
    emu = Emulator(script=[{"reasoning": "Let me see.", "text": "Yes."}, {"text": "ok"}])
    async with httpx.AsyncClient(transport=emu.transport(), base_url=BASE) as client:
        blocks = await _first(client)
        assert blocks[0]["type"] == "thinking"
        assert blocks[0]["signature"].startswith("emu-")
        history = [ASK, {"role": "assistant", "content": blocks}, {"role": "user", "content": "?"}]
        again = await client.post("/anthropic/v1/messages", json=_body(history))
    assert again.status_code == 200


async def test_an_altered_thinking_block_gets_the_apis_400() -> None:
    emu = Emulator(script=[{"reasoning": "Let me see.", "text": "Yes."}] * 3)
    async with httpx.AsyncClient(transport=emu.transport(), base_url=BASE) as client:
        blocks = await _first(client)
        for altered in (
            {**blocks[0], "signature": blocks[0]["signature"][:-1] + "0"},
            {**blocks[0], "thinking": "Let me see!"},
        ):
            history = [ASK, {"role": "assistant", "content": [altered, blocks[1]]}, ASK]
            refused = await client.post("/anthropic/v1/messages", json=_body(history))
            assert refused.status_code == 400
            error = refused.json()["error"]
            assert error["type"] == "invalid_request_error"
            assert error["message"] == (
                "messages.1.content.0: Invalid `signature` in `thinking` block"
            )


async def test_the_proxy_sends_signed_thinking_back_byte_for_byte(tmp_path: Path) -> None:
    script = [{"reasoning": "Plan: say yes.", "text": "Yes."}, {"text": "Done."}]
    async with in_process(tmp_path, provider="anthropic", script=script) as (_, emu, http):
        first = await post(http, "/v1/messages", _body([ASK]))
        blocks = first.json()["content"]
        history = [ASK, {"role": "assistant", "content": blocks}, {"role": "user", "content": "?"}]
        second = await post(http, "/v1/messages", _body(history))
    assert second.status_code == 200, second.text
    sent = decode(emu.received[1].body)["messages"][1]["content"][0]
    assert sent == blocks[0]
    assert_rebuilds(sessions_in(tmp_path), emu)
