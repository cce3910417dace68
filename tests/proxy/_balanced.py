"""Proxy replicas behind a real load balancer: HAProxy, round robin, as users deploy them.

:func:`haproxy` starts Debian's ``/usr/sbin/haproxy`` with a generated config in
front of the replicas (``_replicas``); :func:`play` runs many concurrent
conversations through it with the official ``openai`` SDK (async), streaming
and not, retrying a turn whose answer was cut (a killed replica) as a client
would; :func:`campaign` adds a replica SIGKILLed mid-run and restarted. The
replica test (``test_balanced``) runs a small size; ``bench/bench_replicas.py``
runs larger ones and reports the latency the proxy adds.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import statistics
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import openai
from openai import AsyncOpenAI

from ._replicas import Replica

__all__ = ["HAPROXY", "Paced", "Played", "campaign", "haproxy", "percentile", "play", "summary"]

HAPROXY = "/usr/sbin/haproxy"
KEY = "sk-balanced-test-key"
MODEL = "deepseek-chat"
_ATTEMPTS = 8


class Paced:
    """The upstream answering like a model: a pause after each piece of a
    streamed body (the network edge only), so a killed replica is cut mid-stream."""

    def __init__(self, app: Any, pause: float) -> None:
        self.app, self.pause = app, pause

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        async def paced(message: Any) -> None:
            await send(message)
            if message["type"] == "http.response.body" and message.get("more_body"):
                await asyncio.sleep(self.pause)

        await self.app(scope, receive, paced)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _config(port: int, servers: list[int]) -> str:
    lines = [
        "global",
        "    maxconn 4096",
        "defaults",
        "    mode http",
        "    timeout connect 2s",
        "    timeout client 120s",
        "    timeout server 120s",
        "    retries 3",
        "    option redispatch",
        "frontend clients",
        f"    bind 127.0.0.1:{port}",
        "    default_backend replicas",
        "backend replicas",
        "    balance roundrobin",
        "    option httpchk",
        # The proxy answers loopback Host names only: the check names one.
        "    http-check send meth GET uri /health ver HTTP/1.1 hdr Host 127.0.0.1",
        "    http-check expect status 200",
        # Under load on two cores a check may wait: only a refused connection
        # (a killed replica) takes a server out quickly.
        "    timeout check 5s",
        "    default-server inter 300ms fall 2 rise 1",
    ]
    lines += [f"    server r{i} 127.0.0.1:{p} check" for i, p in enumerate(servers)]
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def haproxy(directory: Path, replicas: list[Replica]) -> Iterator[str]:
    """HAProxy round robin over ``replicas`` (their ports fixed from now on);
    the base URL clients use."""
    port = _free_port()
    config = directory / "haproxy.cfg"
    config.write_text(_config(port, [r.port for r in replicas]))
    log = directory / "haproxy.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [HAPROXY, "-f", str(config), "-db"], stdout=out, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + 20
        while True:
            assert proc.poll() is None, (
                f"haproxy stopped: {proc.stderr.read() if proc.stderr else ''}"
            )
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            assert time.monotonic() < deadline, "haproxy did not listen within 20 s"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@dataclass
class Played:
    """What :func:`play` did: each conversation's messages, each answered
    request's latency (seconds), and how many attempts were cut and retried."""

    histories: list[list[dict[str, str]]]
    latencies: list[float] = field(default_factory=list)
    retried: int = 0
    done: int = 0


async def _turn(
    client: AsyncOpenAI, messages: list[dict[str, str]], stream: bool, played: Played
) -> str:
    for attempt in range(_ATTEMPTS):
        start = time.perf_counter()
        try:
            if stream:
                parts: list[str] = []
                response = await client.chat.completions.create(
                    model=MODEL,
                    messages=messages,
                    stream=True,  # type: ignore[arg-type]
                )
                async for chunk in response:
                    if chunk.choices:
                        parts.append(chunk.choices[0].delta.content or "")
                text = "".join(parts)
            else:
                answer = await client.chat.completions.create(
                    model=MODEL,
                    messages=messages,  # type: ignore[arg-type]
                )
                text = answer.choices[0].message.content or ""
        except (openai.APIError, ValueError) as exc:  # a cut stream, a dead replica
            if attempt == _ATTEMPTS - 1:
                raise AssertionError(f"a turn failed {_ATTEMPTS} times: {exc}") from exc
            played.retried += 1
            await asyncio.sleep(0.05 * (attempt + 1))
            continue
        played.latencies.append(time.perf_counter() - start)
        played.done += 1
        return text
    raise AssertionError("unreachable")


async def play(
    base_url: str, conversations: int, turns: int, played: Played | None = None, tag: str = ""
) -> Played:
    """``conversations`` concurrent conversations of ``turns`` turns through
    ``base_url``; every other turn streams (alternating per conversation).
    ``played``: where to record (read it while this runs to follow progress);
    ``tag`` sets these conversations apart from those of another call."""
    played = played or Played([])
    played.histories[:] = [[] for _ in range(conversations)]
    client = AsyncOpenAI(base_url=base_url, api_key=KEY, max_retries=4, timeout=60)

    async def converse(c: int) -> None:
        history = played.histories[c]
        for t in range(turns):
            history.append({"role": "user", "content": f"{tag}conversation {c}, turn {t}"})
            text = await _turn(client, history, stream=(c + t) % 2 == 0, played=played)
            history.append({"role": "assistant", "content": text})

    try:
        await asyncio.gather(*(converse(c) for c in range(conversations)))
    finally:
        await client.close()
    return played


async def campaign(
    base_url: str, replicas: list[Replica], conversations: int, turns: int, *, seed: int = 19
) -> tuple[Played, int]:
    """:func:`play`, SIGKILLing a replica once a third of the turns were answered
    and restarting it on its port (on its own, the balancer's health check
    takes it out and back in); the result and how many kills there were."""
    total = conversations * turns
    victim = random.Random(seed).choice(replicas)
    played = Played([])
    game = asyncio.ensure_future(play(base_url, conversations, turns, played))
    kills = 0
    while not game.done():
        await asyncio.sleep(0.02)
        if kills == 0 and played.done >= total // 3:
            await asyncio.to_thread(victim.kill)
            kills += 1
            await asyncio.sleep(0.3)
            await asyncio.to_thread(victim.start)
    return await game, kills


def percentile(values: list[float], p: float) -> float:
    """The ``p``-th percentile (0..100) of ``values``, by the nearest rank."""
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(p / 100 * len(ordered)) - 1))
    return ordered[rank]


def summary(values: list[float]) -> dict[str, float]:
    """p50 and p99 in milliseconds."""
    return {
        "p50_ms": round(statistics.median(values) * 1000, 2),
        "p99_ms": round(percentile(values, 99) * 1000, 2),
    }
