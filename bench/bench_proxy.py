"""Benchmark of the latency ``tapelog proxy`` adds to a request, beside a bare
pass-through proxy and the LiteLLM proxy; prints one JSON object (and a table
of the added milliseconds on stderr).

    .venv/bin/python bench/bench_proxy.py [--rounds N] [--no-check] [--cli]
        [--upstream stub|emulator] [--no-litellm]
    LITELLM_VENV=/tmp/litellm-venv .venv/bin/python bench/bench_proxy.py

Separate processes, as a user runs them, all on loopback HTTP: the upstream
(by default a stub that answers every request at once with the same short
answer, ``_peers.Stub``, so that the proxies' added time is not lost in the
noise of an upstream whose own time grows with the history; ``--upstream
emulator``: the emulator, whose prompt-cache accounting takes most of a
second at 10,000 messages), ``tapelog proxy`` (upstream ``deepseek`` pointed
at it, writing to a temporary JSONL store, its invariant checker on as by
default unless ``--no-check``), a bare pass-through proxy (``_peers.PassThrough``:
read the body, POST it upstream with httpx, stream the answer back, under the
same uvicorn), the LiteLLM proxy when ``LITELLM_VENV`` names a venv with
``litellm[proxy]`` installed (``_peers``; its column is skipped with a line
saying why otherwise), and this client. For each history size (100, 1,000
and 10,000 messages of about 300 bytes, user and assistant text alternating)
and each mode (a JSON answer, a streamed one):

1. The conversation's first messages go through ``tapelog proxy`` once (it
   logs them as a new session) and once straight to the upstream and
   through each other proxy.
2. Then ``rounds`` times: the client appends the answer it got and a new user
   message, and sends the same body straight to the upstream and through
   each proxy, in turn. Through ``tapelog proxy`` the request extends the
   conversation it holds: what is new is two messages, plus reading the body
   and comparing its bytes with the body it extends (``_body_prefix``: only
   the new bytes are parsed), matching, logging, rebuilding, checking and
   sending. The rounds are centred on the size: the median request has
   about that many messages.

Per size: ``direct_ms`` and ``proxied_ms`` are medians of the client's wall
time from sending to the last byte of the answer; ``added_ms`` is their
difference, the proxy's whole share (reading the body, matching it to its
session, logging and durably flushing the new events, rebuilding and
checking the bytes, the second loopback hop, relaying and logging the
answer); ``added_min_ms`` the same for the best times;
``passthrough_added_ms`` and ``litellm_added_ms`` the other proxies' medians,
and ``added_over_passthrough`` / ``added_over_litellm`` tapelog's added time
over theirs (the goal: at most 2 over the pass-through). ``decode_ms`` is one
``orjson`` parse of the median body, the least anything that reads the
request must spend; ``added_over_decode`` says how many such parses the
proxy's share costs. Per mode: ``added_ratio`` is ``added(10,000) /
added(100)`` and ``bytes_ratio`` the ratio of the body sizes; proportional to
what is new plus one pass over the bytes means the added time is a fixed part
(two messages, fsyncs, a hop) plus a part linear in the bytes, so
``added_ratio`` stays well below ``bytes_ratio``, and
``marginal_added_per_mb_ms`` (the slope between 1,000 and 10,000 messages) is
the cost of that pass per MB of body.

Sockets. The servers listen with ``TCP_NODELAY`` set (accepted sockets
inherit it), and so does the client; ``tapelog proxy`` and ``tapelog
emulator`` set it too (``cli._common.listen``: without it a kept-alive
connection waits about 40 ms per request for the peer's delayed ACK). By
default this benchmark serves the apps itself (``--serve``: the
:class:`tapelog.proxy.Proxy` the command serves, under uvicorn, with the
command's options); ``--cli`` runs the commands themselves.
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
from _peers import KEY, PassThrough, Stub, litellm_missing, litellm_proxy

from tapelog.log import decode, encode
from tapelog.log._api import encode_str

SIZES = (100, 1_000, 10_000)
MODES = ("json", "stream")
ROUNDS = {100: 25, 1_000: 15, 10_000: 15}
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
    """``--serve``: what ``tapelog emulator`` / ``tapelog proxy`` serve (or the
    bare pass-through), on a loopback port whose connections have
    ``TCP_NODELAY``; prints its URL first."""
    import uvicorn

    from tapelog.emulator import Emulator
    from tapelog.proxy import Proxy, Upstream
    from tapelog.store import JsonlStore

    app: Any
    if what == "emulator":
        app = Emulator().app
    elif what == "stub":
        app = Stub()
    elif what == "passthrough":
        assert upstream is not None
        app = PassThrough(upstream)
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
    headers = {"content-type": "application/json", "authorization": f"Bearer {KEY}"}
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


PEERS = ("tapelog", "passthrough", "litellm")
"""The proxies measured, each against the same direct requests: ``tapelog``
first, as its answers carry the conversation on (it extends the session it
holds); the others are stateless."""


def _measure(
    client: httpx.Client,
    direct: str,
    proxies: dict[str, str],
    size: int,
    stream: bool,
    rounds: int,
) -> dict[str, Any]:
    first = size - rounds - 1
    messages = _history(first - (first + 1) % 2)  # odd: it ends with a user message
    body = encode({"model": MODEL, "messages": messages, "stream": stream})
    _, answer = _send(client, proxies["tapelog"], body, stream)  # it now holds the conversation
    for url in [direct, *list(proxies.values())[1:]]:
        _send(client, url, body, stream)  # warm: a first request opens connections
    times: dict[str, list[float]] = {name: [] for name in ("direct", *proxies)}
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
        # In turn, so that a slower moment of a shared machine hits every column.
        seconds, _ = _send(client, direct, body, stream)
        times["direct"].append(seconds)
        for name, url in proxies.items():
            seconds, text = _send(client, url, body, stream)
            times[name].append(seconds)
            if name == "tapelog":
                answer = text
    direct_ms = statistics.median(times["direct"]) * 1000
    added = {name: statistics.median(times[name]) * 1000 - direct_ms for name in proxies}
    mb = statistics.median(sizes) / 1e6
    decode_ms = _decode_ms(middle)
    row: dict[str, Any] = {
        "messages": len(messages) - rounds + 1,  # the median request's
        "body_bytes": int(statistics.median(sizes)),
        "direct_ms": round(direct_ms, 3),
        "proxied_ms": round(statistics.median(times["tapelog"]) * 1000, 3),
        "added_ms": round(added["tapelog"], 3),
        "added_min_ms": round((min(times["tapelog"]) - min(times["direct"])) * 1000, 3),
        "added_per_mb_ms": round(added["tapelog"] / mb, 3),
        "decode_ms": round(decode_ms, 3),
        "added_over_decode": round(added["tapelog"] / decode_ms, 2),
        "rounds": rounds,
    }
    for name in proxies:
        if name != "tapelog":
            row[f"{name}_added_ms"] = round(added[name], 3)
            best = (min(times[name]) - min(times["direct"])) * 1000
            row[f"{name}_added_min_ms"] = round(best, 3)
            row[f"added_over_{name}"] = round(added["tapelog"] / max(added[name], 0.001), 2)
    return row


def bench_proxy(
    *,
    check: bool = True,
    rounds: int | None = None,
    cli: bool = False,
    litellm: bool = True,
    upstream: str = "stub",
) -> dict[str, Any]:
    results: dict[str, Any] = {"check": check, "servers": "cli" if cli else "nodelay"}
    results["upstream"] = upstream
    results["by_mode"] = {}
    missing = litellm_missing() if litellm else "skipped: --no-litellm"
    if missing is not None:
        print(f"bench_proxy: LiteLLM column {missing}", file=sys.stderr)
        results["litellm"] = missing
    nodelay = httpx.HTTPTransport(socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
    with contextlib.ExitStack() as stack:
        store = stack.enter_context(tempfile.TemporaryDirectory())
        if upstream == "emulator":
            emu = stack.enter_context(_server(_argv(cli, "emulator")))
            emulator = f"http://127.0.0.1:{_port(emu)}/deepseek"
        else:
            emu = stack.enter_context(_server(_argv(False, "stub")))
            emulator = f"http://127.0.0.1:{_port(emu)}"
        if cli:
            args = _argv(cli, "proxy", "--upstream", "deepseek", "--base-url", emulator)
        else:
            args = _argv(cli, "proxy", "--upstream-url", emulator)
        args += ["--store", store, "--check" if check else "--no-check"]
        env = {"DEEPSEEK_API_KEY": "", "TAPELOG_PROVIDERS": ""}
        banner = stack.enter_context(_server(args, env))
        proxies = {"tapelog": f"http://127.0.0.1:{_port(banner)}/v1/chat/completions"}
        bare = stack.enter_context(_server(_argv(False, "passthrough", "--upstream-url", emulator)))
        proxies["passthrough"] = f"http://127.0.0.1:{_port(bare)}/v1/chat/completions"
        if missing is None:
            try:
                proxies["litellm"] = stack.enter_context(litellm_proxy(emulator, MODEL))
            except RuntimeError as exc:
                print(f"bench_proxy: LiteLLM column skipped: {exc}", file=sys.stderr)
                results["litellm"] = f"skipped: {exc}".splitlines()[0]
        client = stack.enter_context(httpx.Client(timeout=600, transport=nodelay))
        direct = f"{emulator}/chat/completions"
        for mode in MODES:
            rows = {
                str(size): _measure(
                    client, direct, proxies, size, mode == "stream", rounds or ROUNDS[size]
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
    print(_table(results, list(proxies)), file=sys.stderr)
    return results


def _table(results: dict[str, Any], names: list[str]) -> str:
    """The added milliseconds side by side, one line per mode and size: the
    median and, after the slash, the difference of the best times; then
    tapelog's median over the pass-through's (the goal: at most 2)."""
    head = "".join(f"{name:>16}" for name in names)
    lines = [f"added ms (median/best)  messages{head}{'tapelog/pass':>14}"]
    for mode, found in results["by_mode"].items():
        for row in found["sizes"].values():
            cells = [(row["added_ms"], row["added_min_ms"])] + [
                (row[f"{name}_added_ms"], row[f"{name}_added_min_ms"]) for name in names[1:]
            ]
            text = "".join(f"{f'{m:.1f}/{b:.1f}':>16}" for m, b in cells)
            ratio = row.get("added_over_passthrough")
            text += f"{ratio:>14.2f}" if ratio is not None else ""
            lines.append(f"{mode:<23} {row['messages']:>9}{text}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=None, help="requests timed per size")
    parser.add_argument("--no-check", action="store_true", help="run the proxy with --no-check")
    parser.add_argument("--cli", action="store_true", help="run the shipped commands")
    parser.add_argument("--no-litellm", action="store_true", help="leave the LiteLLM column out")
    parser.add_argument(
        "--upstream",
        choices=("stub", "emulator"),
        default="stub",
        help="what answers: a stub that answers at once (default) or the emulator",
    )
    parser.add_argument(
        "--serve", choices=("emulator", "stub", "proxy", "passthrough"), help=argparse.SUPPRESS
    )
    parser.add_argument("--upstream-url", help=argparse.SUPPRESS)
    parser.add_argument("--store", help=argparse.SUPPRESS)
    parser.add_argument("--check", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        _serve(args.serve, args.upstream_url, args.store, check=not args.no_check)
        return
    results = bench_proxy(
        check=not args.no_check,
        rounds=args.rounds,
        cli=args.cli,
        litellm=not args.no_litellm,
        upstream=args.upstream,
    )
    print(encode_str(results))


if __name__ == "__main__":
    main()
