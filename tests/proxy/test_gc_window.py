"""The garbage collector's passes wait while a proxied request is in flight.

``_gc_window.GcWindow`` raises the collector's first threshold from a model
route's arrival until its answer has been sent, and restores the program's
own threshold after, also when requests overlap or fail. The upstream (the
emulator, in this process) reads the threshold while the proxy waits for it.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from proxy._helpers import in_process, post
from tapelog.emulator import Emulator
from tapelog.proxy._gc_window import IN_FLIGHT_THRESHOLD, GcWindow

_PATH = "/v1/chat/completions"


@pytest.fixture
def threshold() -> Iterator[tuple[int, int, int]]:
    """The program's thresholds, restored after the test whatever it did."""
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        yield gc.get_threshold()
    finally:
        gc.set_threshold(*saved)


def test_overlapping_windows_restore_the_threshold_when_the_last_ends(
    threshold: tuple[int, int, int],
) -> None:
    window = GcWindow()
    window.enter()
    assert gc.get_threshold() == (IN_FLIGHT_THRESHOLD, 10, 10)
    window.enter()
    window.leave()
    assert gc.get_threshold() == (IN_FLIGHT_THRESHOLD, 10, 10), "one request still in flight"
    window.leave()
    assert gc.get_threshold() == threshold


@pytest.mark.parametrize("first", [0, IN_FLIGHT_THRESHOLD * 2])
def test_a_collector_turned_off_or_already_lazier_is_left_alone(
    threshold: tuple[int, int, int], first: int
) -> None:
    gc.set_threshold(first, 10, 10)
    window = GcWindow()
    window.enter()
    assert gc.get_threshold() == (first, 10, 10)
    window.leave()
    assert gc.get_threshold() == (first, 10, 10)


class Watching(Emulator):
    """The emulator, noting the collector's threshold as each request arrives."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[int] = []
        app = self.app

        async def watched(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                self.seen.append(gc.get_threshold()[0])
            await app(scope, receive, send)

        self.app = watched  # type: ignore[assignment]


async def test_the_window_spans_a_proxied_request_and_closes_after(
    tmp_path: Path, threshold: tuple[int, int, int]
) -> None:
    emu = Watching()
    async with in_process(tmp_path, emulator=emu) as (proxy, _, http):
        body = {"model": "deepseek-chat", "messages": [{"role": "user", "content": "hi"}]}
        for stream in (False, True):
            answer = await post(http, _PATH, {**body, "stream": stream})
            assert answer.status_code == 200, answer.text
            assert gc.get_threshold() == threshold, "restored once the answer was sent"
        refused = await post(http, _PATH, {"model": "deepseek-chat", "messages": "no"})
        assert refused.status_code == 400
        assert gc.get_threshold() == threshold, "restored after a refusal too"
        await proxy.sessions.settled()
    assert emu.seen == [IN_FLIGHT_THRESHOLD, IN_FLIGHT_THRESHOLD]
