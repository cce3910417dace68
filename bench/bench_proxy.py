"""Benchmark of the latency ``tapelog proxy`` adds to a request; prints one JSON object.

    .venv/bin/python bench/bench_proxy.py [--rounds N] [--no-check] [--cli]

Three processes, as a user runs them: the emulator, the proxy (upstream
``deepseek`` pointed at the emulator, writing to a temporary JSONL store, its
invariant checker on as by default unless ``--no-check``) and this client,
all on loopback HTTP. For each history size (100, 1,000 and 10,000 messages
of about 300 bytes, user and assistant text alternating) and each mode (a
JSON answer, a streamed one):

1. The conversation's first messages go through the proxy once (the proxy
   logs them as a new session) and straight to the emulator once.
2. Then ``rounds`` times: the client appends the answer it got and a new user
   message, and sends the same body straight to the emulator and through the
   proxy, in turn. Through the proxy the request extends the conversation the
   proxy holds: what is new is two messages, plus one pass over the body
   (read, decode, encode the message list once to find the prefix the proxy
   already translated, translate and key the new messages, match, log,
   rebuild, check, send). The rounds are centred on the size: the median
   request has about that many messages.

Per size: ``direct_ms`` and ``proxied_ms`` are medians of the client's wall
time from sending to the last byte of the answer; ``added_ms`` is their
difference, the proxy's whole share (reading the body, matching it to its
session, logging and durably flushing the new events, rebuilding and
checking the bytes, the second loopback hop, relaying and logging the
answer); ``added_min_ms`` the same for the best times. ``decode_ms`` is one
``orjson`` parse of the median body, the least anything that reads the
request must spend; ``added_over_decode`` says how many such parses the
proxy's share costs. Per mode: ``added_ratio`` is ``added(10,000) /
added(100)`` and ``bytes_ratio`` the ratio of the body sizes; proportional to
what is new plus one pass over the bytes means the added time is a fixed part
(two messages, fsyncs, a hop) plus a part linear in the bytes, so
``added_ratio`` stays well below ``bytes_ratio``, and
``marginal_added_per_mb_ms`` (the slope between 1,000 and 10,000 messages) is
the cost of that pass per MB of body.

Sockets. Both servers listen with ``TCP_NODELAY`` set (accepted sockets
inherit it), and so does the client. ``tapelog proxy`` and ``tapelog
emulator`` bind with ``socket.create_server``, whose accepted sockets asyncio
leaves without ``TCP_NODELAY`` (it sets it only on sockets whose protocol is
``IPPROTO_TCP``, and ``create_server`` leaves it 0): on a kept-alive
connection a response written in two pieces then waits for the client's
delayed ACK, about 40 ms per request. By default this benchmark therefore
serves the same apps itself (``--serve``: the :class:`tapelog.proxy.Proxy` and
:class:`tapelog.emulator.Emulator` the commands serve, under uvicorn, with the
commands' options) to measure the proxy's own cost; ``--cli`` runs the
commands themselves, stall included.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from tapelog.log import decode, encode
from tapelog.log._api import encode_str

SIZES = (100, 1_000, 10_000)
MODES = ("json", "stream")
ROUNDS = {100: 25, 1_000: 15, 10_000: 9}
MODEL = "deepseek-chat"
_LOREM = (
    "The session log is the single source of truth; every request is a pure "
    "function of it, so a prompt cache hits by construction. "
)


def _text(i: int, size: int = 300) -> str:
    return (f"[{i}] " + _LOREM * (size // len(_LOREM) + 1))[:size]


def _history(n: int) -> list[dict[str, Any]]:
    """``n`` messages, user first, ending with a user message when ``n`` is odd."""
    roles = ("user", "assistant")
    return [{"role": roles[i % 2], "content": _text(i)} for i in range(n)]


@contextmanager
def _server(argv: list[str], env: dict[str, str] | None = None) -> Iterator[str]:
    """A server in a subprocess; the first line it prints. Ctrl-C at the end."""
    proc = subprocess.Popen(
        [sys.executable, *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, **(env or {})},
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        if not first:
            raise SystemExit(f"{' '.join(argv[:3])} did not start")
        yield first
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def _argv(cli: bool, what: str, *args: str) -> list[str]:
    """How to start ``what`` (``emulator`` or ``proxy``): a command, or ``--serve``."""
    if cli:
        return ["-c", "from tapelog.cli import main; main()", what, "--port", "0", *args]
    return [__file__, "--serve", what, *args]


def _serve(what: str, upstream: str | None, store: str | None, check: bool) -> None:
    """``--serve``: what ``tapelog emulator`` / ``tapelog proxy`` serve, on a
    loopback port whose connections have ``TCP_NODELAY``; prints its URL first."""
    import uvicorn

    from tapelog.emulator import Emulator
    from tapelog.proxy import Proxy, Upstream
    from tapelog.store import JsonlStore

    app: Any
    if what == "emulator":
        app = Emulator().app
    else:
        assert upstream is not None
        assert store is not None
        target = Upstream.resolve("deepseek", base_url=upstream)
        app = Proxy(target, JsonlStore(store), check=check).app
    sock = socket.create_server(("127.0.0.1", 0))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # inherited by accepted sockets
    print(f"{what} on http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    with contextlib.suppress(KeyboardInterrupt):
        uvicorn.Server(config).run(sockets=[sock])


def _port(line: str) -> int:
    found = re.search(r"http://127\.0\.0\.1:(\d+)", line)
    if found is None:
        raise SystemExit(f"no port in {line!r}")
    return int(found.group(1))


def _send(client: httpx.Client, url: str, body: bytes, stream: bool) -> tuple[float, str]:
    """One request: seconds from sending to the answer's last byte, and the answer's text."""
    headers = {"content-type": "application/json", "authorization": "Bearer sk-bench"}
    start = time.perf_counter()
    if not stream:
        response = client.post(url, content=body, headers=headers)
        elapsed = time.perf_counter() - start
        response.raise_for_status()
        return elapsed, str(decode(response.content)["choices"][0]["message"]["content"])
    with client.stream("POST", url, content=body, headers=headers) as response:
        raw = response.read()
    elapsed = time.perf_counter() - start
    response.raise_for_status()
    text = []
    for line in raw.split(b"\n"):
        if line.startswith(b"data: {"):
            for choice in decode(line[6:]).get("choices", []):
                text.append(choice.get("delta", {}).get("content") or "")
    return elapsed, "".join(text)


def _decode_ms(body: bytes) -> float:
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        decode(body)
        best = min(best, time.perf_counter() - start)
    return best * 1000


def _measure(
    client: httpx.Client, direct: str, proxied: str, size: int, stream: bool, rounds: int
) -> dict[str, Any]:
    first = size - rounds - 1
    messages = _history(first - (first + 1) % 2)  # odd: it ends with a user message
    body = encode({"model": MODEL, "messages": messages, "stream": stream})
    _, answer = _send(client, proxied, body, stream)  # the proxy now holds the conversation
    _send(client, direct, body, stream)
    times: dict[str, list[float]] = {"direct": [], "proxied": []}
    sizes: list[int] = []
    middle = b""
    for i in range(rounds):
        messages += [
            {"role": "assistant", "content": answer},
            {"role": "user", "content": _text(i)},
        ]
        body = encode({"model": MODEL, "messages": messages, "stream": stream})
        sizes.append(len(body))
        if i == rounds // 2:
            middle = body
        seconds, _ = _send(client, direct, body, stream)
        times["direct"].append(seconds)
        seconds, answer = _send(client, proxied, body, stream)
        times["proxied"].append(seconds)
    direct_ms = statistics.median(times["direct"]) * 1000
    proxied_ms = statistics.median(times["proxied"]) * 1000
    added = proxied_ms - direct_ms
    mb = statistics.median(sizes) / 1e6
    decode_ms = _decode_ms(middle)
    return {
        "messages": len(messages) - rounds + 1,  # the median request's
        "body_bytes": int(statistics.median(sizes)),
        "direct_ms": round(direct_ms, 3),
        "proxied_ms": round(proxied_ms, 3),
        "added_ms": round(added, 3),
        "added_min_ms": round((min(times["proxied"]) - min(times["direct"])) * 1000, 3),
        "added_per_mb_ms": round(added / mb, 3),
        "decode_ms": round(decode_ms, 3),
        "added_over_decode": round(added / decode_ms, 2),
        "rounds": rounds,
    }


def bench_proxy(
    *, check: bool = True, rounds: int | None = None, cli: bool = False
) -> dict[str, Any]:
    results: dict[str, Any] = {"check": check, "servers": "cli" if cli else "nodelay"}
    results["by_mode"] = {}
    nodelay = httpx.HTTPTransport(socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
    with tempfile.TemporaryDirectory() as store, _server(_argv(cli, "emulator")) as emu:
        emulator = f"http://127.0.0.1:{_port(emu)}/deepseek"
        if cli:
            args = _argv(cli, "proxy", "--upstream", "deepseek", "--base-url", emulator)
        else:
            args = _argv(cli, "proxy", "--upstream-url", emulator)
        args += ["--store", store, "--check" if check else "--no-check"]
        env = {"DEEPSEEK_API_KEY": "", "TAPELOG_PROVIDERS": ""}
        with (
            _server(args, env) as banner,
            httpx.Client(timeout=600, transport=nodelay) as client,
        ):
            proxied = f"http://127.0.0.1:{_port(banner)}/v1/chat/completions"
            direct = f"{emulator}/chat/completions"
            for mode in MODES:
                rows = {
                    str(size): _measure(
                        client, direct, proxied, size, mode == "stream", rounds or ROUNDS[size]
                    )
                    for size in SIZES
                }
                small, middle, large = (rows[str(size)] for size in SIZES)
                grown_mb = (large["body_bytes"] - middle["body_bytes"]) / 1e6
                results["by_mode"][mode] = {
                    "sizes": rows,
                    "added_ratio": round(large["added_ms"] / small["added_ms"], 2),
                    "bytes_ratio": round(large["body_bytes"] / small["body_bytes"], 2),
                    "marginal_added_per_mb_ms": round(
                        (large["added_ms"] - middle["added_ms"]) / grown_mb, 3
                    ),
                }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=None, help="requests timed per size")
    parser.add_argument("--no-check", action="store_true", help="run the proxy with --no-check")
    parser.add_argument("--cli", action="store_true", help="run the shipped commands")
    parser.add_argument("--serve", choices=("emulator", "proxy"), help=argparse.SUPPRESS)
    parser.add_argument("--upstream-url", help=argparse.SUPPRESS)
    parser.add_argument("--store", help=argparse.SUPPRESS)
    parser.add_argument("--check", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        _serve(args.serve, args.upstream_url, args.store, check=not args.no_check)
        return
    print(encode_str(bench_proxy(check=not args.no_check, rounds=args.rounds, cli=args.cli)))


if __name__ == "__main__":
    main()
