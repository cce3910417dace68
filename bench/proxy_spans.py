"""Where a proxied request's time goes: timing marks inside a served ``tapelog proxy``.

    .venv/bin/python bench/proxy_spans.py [--messages N] [--rounds N] [--json]

The same setup as ``bench_proxy.py`` (a stub upstream, ``tapelog proxy`` on a
temporary JSONL store with its checker on, a bare pass-through, separate
processes on loopback), but the proxy's process wraps a few of its own
methods with ``time.perf_counter_ns`` marks (reading the body, translating,
matching, logging, the body's rebuild and check, the upstream's answer head,
the relay's pieces, the end of the response) and notes the garbage
collector's passes. After ``rounds`` requests that each extend a conversation
of about ``messages`` messages by two (with a direct request to the stub
between two proxied ones, as ``bench_proxy`` has; ``--back-to-back``: none,
so that each request finds the last turn's sync under way and waits for it
while matching), it prints, per part, the median
milliseconds (and the mean for the fastest half and the slowest quarter of
the requests, to show what makes slow requests slow), and the collector's
time inside requests. The marks are this script's, not the proxy's: nothing
of them ships.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import inspect
import os
import socket
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import httpx
from bench_proxy import MODEL, _history, _port, _send, _server, _text

from tapelog.log import encode

PARTS = (
    ("routing, the guard, reading the body", "in", "read<"),
    ("parsing the new bytes, translating", "read<", "understand<"),
    ("matching, the session taken back", "understand<", "plan>"),
    ("planning and logging the request, its write", "plan>", "written"),
    ("the body rebuilt and checked (during the sync)", "written", "body<"),
    ("the rest of the sync's wait", "body<", "upsend>"),
    ("the second hop: the upstream's answer head", "upsend>", "upsend<"),
    ("the head sent on, the body awaited", "upsend<", "relay>"),
    ("the pieces parsed and logged, the end written", "relay>", "last piece"),
    ("the end of the message", "last piece", "end"),
)


def _instrumented(store: str, upstream: str) -> Any:
    """The proxy app ``bench_proxy`` serves, with timing marks (see the module docstring)."""
    import tapelog.proxy._app as app_module
    from tapelog.proxy import Proxy, Upstream
    from tapelog.proxy._exchange import Exchange
    from tapelog.proxy._relay import Relay
    from tapelog.store import JsonlStore

    marks: list[tuple[str, int]] | None = None
    requests: list[list[tuple[str, int]]] = []
    passes: list[tuple[int, int]] = []
    started = [0]

    def mark(name: str) -> None:
        if marks is not None:
            marks.append((name, time.perf_counter_ns()))

    def collector(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[0] = time.perf_counter_ns()
        else:
            passes.append((started[0], time.perf_counter_ns()))

    gc.callbacks.append(collector)

    def wrap(owner: Any, name: str, before: str | None, after: str) -> None:
        original = getattr(owner, name)

        @functools.wraps(original)
        def sync(*args: Any, **kwargs: Any) -> Any:
            if before:
                mark(before)
            try:
                return original(*args, **kwargs)
            finally:
                mark(after)

        @functools.wraps(original)
        async def asynchronous(*args: Any, **kwargs: Any) -> Any:
            if before:
                mark(before)
            try:
                return await original(*args, **kwargs)
            finally:
                mark(after)

        chosen = asynchronous if inspect.iscoroutinefunction(original) else sync
        setattr(owner, name, chosen)

    wrap(app_module.Proxy, "_read", None, "read<")
    wrap(app_module.Proxy, "_understand", None, "understand<")
    wrap(app_module, "plan_messages", "plan>", "plan<")
    wrap(Exchange, "request_body", "written", "body<")
    wrap(httpx.AsyncClient, "send", "upsend>", "upsend<")
    wrap(Relay, "_read", "relay>", "relay<")
    target = Upstream.resolve("deepseek", base_url=upstream)
    proxy = Proxy(target, JsonlStore(store), check=True)
    inner = proxy.app

    async def app(scope: Any, receive: Any, send: Any) -> None:
        nonlocal marks
        if scope["type"] != "http":
            await inner(scope, receive, send)
            return
        if scope["path"] == "/spans":  # what was measured, for the driving process
            body = encode({"requests": requests, "passes": passes})
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": body})
            return
        marks = [("in", time.perf_counter_ns())]
        own = marks

        async def marked(message: Any) -> None:
            if message["type"] == "http.response.body":
                mark("last piece" if message.get("more_body") else "end")
            await send(message)

        try:
            await inner(scope, receive, marked)
        finally:
            requests.append(own)

    return app


def _serve(store: str, upstream: str) -> None:
    import uvicorn

    sock = socket.create_server(("127.0.0.1", 0))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    print(f"proxy on http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(
        _instrumented(store, upstream), log_level="warning", access_log=False, lifespan="on"
    )
    with contextlib.suppress(KeyboardInterrupt):
        uvicorn.Server(config).run(sockets=[sock])


def _parts(marks: list[tuple[str, int]]) -> dict[str, float]:
    """Milliseconds per part of one request (the first mark of each name; the
    last ``last piece`` before the end)."""
    at: dict[str, int] = {}
    for name, when in marks:
        if name == "last piece" or name not in at:
            at[name] = when
    return {
        label: (at[end] - at[start]) / 1e6
        for label, start, end in PARTS
        if start in at and end in at
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--messages", type=int, default=100, help="the history's size")
    parser.add_argument("--rounds", type=int, default=200, help="requests measured")
    parser.add_argument("--json", action="store_true", help="JSON answers instead of streams")
    parser.add_argument(
        "--back-to-back",
        action="store_true",
        help="no direct request between two proxied ones (the next request then waits "
        "for the last turn's sync)",
    )
    parser.add_argument("--serve", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        _serve(*args.serve)
        return
    stream = not args.json
    here = os.path.dirname(os.path.abspath(__file__))
    nodelay = httpx.HTTPTransport(socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
    with contextlib.ExitStack() as stack:
        store = stack.enter_context(tempfile.TemporaryDirectory())
        stub = stack.enter_context(
            _server([os.path.join(here, "bench_proxy.py"), "--serve", "stub"])
        )
        upstream = f"http://127.0.0.1:{_port(stub)}"
        env = {"DEEPSEEK_API_KEY": "", "TAPELOG_PROVIDERS": ""}
        banner = stack.enter_context(_server([__file__, "--serve", store, upstream], env))
        base = f"http://127.0.0.1:{_port(banner)}"
        client = stack.enter_context(httpx.Client(timeout=600, transport=nodelay))
        messages = _history(args.messages - 1)
        _, answer = _send(client, f"{base}/v1/chat/completions", _body(messages, stream), stream)
        warm = 5
        for i in range(args.rounds + warm):
            messages += [
                {"role": "assistant", "content": answer},
                {"role": "user", "content": _text(i)},
            ]
            body = _body(messages, stream)
            if not args.back_to_back:  # as bench_proxy spaces them: a direct request between
                _send(client, f"{upstream}/chat/completions", body, stream)
            _, answer = _send(client, f"{base}/v1/chat/completions", body, stream)
        found = client.get(f"{base}/spans").json()
    _report(found["requests"][1 + warm :], found["passes"])


def _body(messages: list[dict[str, Any]], stream: bool) -> bytes:
    return encode({"model": MODEL, "messages": messages, "stream": stream})


def _report(requests: list[list[Any]], passes: list[list[int]]) -> None:
    rows = [(_parts([(n, t) for n, t in r]), r[0][1], r[-1][1]) for r in requests]
    rows.sort(key=lambda row: sum(row[0].values()))
    n = len(rows)
    groups: dict[str, list[Any]] = {
        "median": rows,
        "fastest half": rows[: n // 2],
        "slowest quarter": rows[3 * n // 4 :],
    }
    mean: Callable[[list[float]], float] = statistics.mean
    print(f"{'part (ms)':<50}{'median':>9}{'fast half':>11}{'slow 1/4':>10}")
    for label, _, _ in PARTS:
        cells = [statistics.median(r[0].get(label, 0.0) for r in rows)]
        cells += [
            mean([r[0].get(label, 0.0) for r in g]) for k, g in groups.items() if k != "median"
        ]
        print(f"{label:<50}" + "".join(f"{c:>10.2f}" for c in cells))

    def collected(group: list[Any]) -> float:
        total = 0.0
        for _, start, end in group:
            total += sum(min(b, end) - max(a, start) for a, b in passes if b > start and a < end)
        return total / 1e6 / max(len(group), 1)

    print(
        f"collector's passes inside a request, mean ms: fastest half "
        f"{collected(groups['fastest half']):.2f}, slowest quarter "
        f"{collected(groups['slowest quarter']):.2f}"
    )


if __name__ == "__main__":
    main()
