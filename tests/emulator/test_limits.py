"""The emulator's memory is bounded (issue 8, item 10).

It used to read every request body whole and keep each one in ``received``
forever (8 bodies of 100 MB: RSS from 42 to 842 MB). Now a body over
``max_body_bytes`` (32 MiB by default) is answered 413 in the provider's error
shape before it is read whole, and ``received`` keeps only the latest requests
(``keep_requests``, ``keep_bytes``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from tapelog.emulator import Emulator
from tapelog.log import decode, encode

from ._helpers import BASE

OPENAI = "/openai/v1/chat/completions"
ANTHROPIC = "/anthropic/v1/messages"


def _body(text: str = "hi", *, anthropic: bool = False) -> bytes:
    body: dict[str, object] = {"model": "m", "messages": [{"role": "user", "content": text}]}
    if anthropic:
        body["max_tokens"] = 16
    return encode(body)


async def _post(emu: Emulator, path: str, content: bytes | AsyncIterator[bytes]) -> httpx.Response:
    async with httpx.AsyncClient(transport=emu.transport(), base_url=BASE) as client:
        return await client.post(path, content=content)


async def test_a_body_over_32_mib_is_refused_with_413_by_default() -> None:
    emu = Emulator(script=[{"text": "never sent"}])
    big = b" " * (32 * 1024 * 1024) + _body()  # valid JSON, one byte per space over the cap
    response = await _post(emu, OPENAI, big)
    assert response.status_code == 413
    assert decode(response.content) == {
        "error": {
            "message": (
                "Request body too large: this emulator reads at most 33554432 bytes "
                f"(max_body_bytes) and the body is {len(big)} bytes."
            ),
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        }
    }
    assert emu.pending == 1  # no script entry was used
    assert [(r.status, r.body) for r in emu.received] == [(413, b"")]  # the body is not kept


async def test_the_cap_is_configurable_and_speaks_anthropic_on_its_route() -> None:
    emu = Emulator(max_body_bytes=200)
    fits = await _post(emu, ANTHROPIC, _body("x" * 50, anthropic=True))
    assert fits.status_code == 200
    refused = await _post(emu, ANTHROPIC, _body("x" * 500, anthropic=True))
    assert refused.status_code == 413
    error = decode(refused.content)
    assert error["type"] == "error"
    assert error["error"]["type"] == "request_too_large"
    assert error["error"]["message"].startswith("Request body too large: ")
    assert error["request_id"] == refused.headers["request-id"]


async def test_a_chunked_body_without_a_length_is_cut_at_the_cap() -> None:
    emu = Emulator(max_body_bytes=1000)
    sent = 0

    async def pieces() -> AsyncIterator[bytes]:
        nonlocal sent
        for _ in range(100):
            sent += 1
            yield b" " * 100

    response = await _post(emu, OPENAI, pieces())
    assert response.status_code == 413
    assert "the body is larger than that" in decode(response.content)["error"]["message"]
    assert sent < 100, "the emulator read on past the cap"


async def test_received_keeps_the_latest_requests_only() -> None:
    emu = Emulator(keep_requests=3)
    for i in range(5):
        assert (await _post(emu, OPENAI, _body(f"n{i}"))).status_code == 200
    assert [r.json()["messages"][0]["content"] for r in emu.received] == ["n2", "n3", "n4"]
    assert emu.dropped == 2


async def test_received_keeps_at_most_keep_bytes_of_bodies_but_always_the_latest() -> None:
    size = len(_body("x" * 100))
    emu = Emulator(keep_bytes=2 * size)
    for i in range(4):
        await _post(emu, OPENAI, _body(str(i) * 100))
    assert [r.json()["messages"][0]["content"][0] for r in emu.received] == ["2", "3"]
    assert emu.dropped == 2
    huge = _body("y" * 1000)
    await _post(emu, OPENAI, huge)
    assert [r.body for r in emu.received] == [huge]  # over the budget alone, yet kept
    assert emu.dropped == 4
    emu.received.clear()  # a test may clear it; the count starts again from what is there
    await _post(emu, OPENAI, _body("z"))
    assert len(emu.received) == 1


@pytest.mark.parametrize("option", ["max_body_bytes", "keep_requests", "keep_bytes"])
@pytest.mark.parametrize("value", [0, -1, True, 1.5])
def test_limits_must_be_positive_integers(option: str, value: object) -> None:
    with pytest.raises(ValueError, match=f"{option} must be a positive integer"):
        Emulator(**{option: value})  # type: ignore[arg-type]
