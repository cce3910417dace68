"""Benchmark of ``tapelog serve``; run by hand, prints one JSON object.

    .venv/bin/python bench/bench_serve.py [--sessions 10000] [--steps 10000]

Two measurements, each against a real ``tapelog serve`` process on loopback
(the client is this process, so server and client do not share an interpreter):

* **sessions page**: a JSONL store of ``--sessions`` small sessions (one to
  three turns of two steps, 25 to 70 events each; written as files directly,
  header line plus event lines, with the store's own ``header_line`` and
  ``Event.encode``: creating them one by one with ``JsonlStore.create`` would
  fsync 10,000 times). Time to first byte of ``/``:
  ``cold`` (a new server, no index file: every session folded),
  ``warm`` (the same server again: one stat per session), and
  ``restart`` (a new server reading the index file the first one saved).
  ``audited_all_s`` is how long the background auditor took to fill in the
  cache efficiency of every session after the cold start.
* **session page**: one session of ``--steps`` loop steps (the cache
  audit's benchmark log, ``bench_audit.build``). Time to first byte of
  ``/s/ID`` cold (the server loads, walks and audits the log) and warm (it
  follows the log it holds), against the time to parse the log once (read
  the file and ``orjson.loads`` every line: the least any reader must spend)
  and to load it with ``JsonlStore.load`` (every event validated). The
  ``*_over_parse`` ratios are what to compare between machines.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from statistics import median
from typing import Any

import httpx
import orjson
from bench_audit import build

from tapelog.log._api import Event, Session, SessionInfo, encode_str
from tapelog.store import JsonlStore
from tapelog.store._format import header_line

START = 1_764_480_000_000


def _template(turns: int) -> list[Event]:
    """A small loop session's events: ``turns`` turns of a tool step and an answer."""
    session = Session("template", created=START, clock=lambda: START)
    header = {
        "config": {"provider": "deepseek", "model": "deepseek-chat"},
        "system": "You are terse.",
        "tools": [{"name": "read", "description": "Read a file."}],
    }
    source = {"provider": "deepseek", "model": "deepseek-chat"}
    cached = 0
    for turn in range(1, turns + 1):
        session.append("turn/start", {"turn": turn})
        user = {
            "content": [{"type": "text", "text": f"question {turn}"}],
            "source": {"kind": "user"},
        }
        session.append("user/message", user, surface_op="append")
        for step in (1, 2):
            session.append("step/start", {"turn": turn, "step": step})
            if turn == step == 1:
                session.append("request/header", {"header": header, "reason": "initial"})
            usage = {"input": 120, "cache_read": cached, "cache_write": 0, "output": 9}
            cached += 120
            for piece in ("an ", "answer"):
                chunk = {"kind": "text", "text": piece}
                session.append("assistant/chunk", {"turn": turn, "step": step, "chunk": chunk})
            if step == 1:
                call = {"type": "tool_call", "id": f"c{turn}", "name": "read", "arguments": "{}"}
                content: list[dict[str, Any]] = [call]
            else:
                content = [{"type": "text", "text": f"answer {turn}"}]
            data = {"turn": turn, "step": step, "content": content, "source": source}
            session.append(
                "assistant/message", data | {"usage": usage | {"reasoning": 0}}, surface_op="append"
            )
            if step == 1:
                ids = {"turn": turn, "step": 1, "call_id": f"c{turn}"}
                session.append("tool/call", ids | {"name": "read", "arguments": "{}"})
                result = ids | {"content": "file contents " * 20, "is_error": False}
                session.append("tool/result", result, surface_op="append")
            session.append("step/end", {"turn": turn, "step": step})
        session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    return list(session.events)


def write_sessions(root: Path, count: int) -> None:
    """``count`` stored sessions, each a header line plus a template's event lines."""
    root.mkdir(parents=True, exist_ok=True)
    bodies = [b"".join(e.encode() + b"\n" for e in _template(turns)) for turns in (1, 2, 3)]
    for i in range(count):
        info = SessionInfo(id=f"bench-{i:05d}", created=START + i * 1000)
        (root / f"{info.id}.jsonl").write_bytes(header_line(info) + b"\n" + bodies[i % 3])
    loaded = JsonlStore(root).load(f"bench-{count - 1:05d}")  # a valid log, as the store reads it
    assert len(loaded.session) == len(_template(1 + (count - 1) % 3))


@contextmanager
def server(store: Path, index: Path) -> Iterator[str]:
    """A ``tapelog serve`` process on a free loopback port; its base URL."""
    code = "from tapelog.cli import main; main()"
    args = ["serve", "--store", str(store), "--port", "0", "--index", str(index)]
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().decode().strip().rstrip("/")
        yield url
    finally:
        proc.send_signal(2)  # Ctrl-C: the index is saved on the way out
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def ttfb(client: httpx.Client, url: str) -> tuple[float, int]:
    """Seconds to the response's first byte, and the page's size."""
    start = time.perf_counter()
    with client.stream("GET", url) as response:
        first = None
        size = 0
        for chunk in response.iter_raw():
            if first is None:
                first = time.perf_counter() - start
            size += len(chunk)
        assert response.status_code == 200, response.status_code
    return first or 0.0, size


def sessions_page(root: Path, count: int) -> dict[str, Any]:
    store, index = root / "sessions", root / "sessions.index"
    started = time.perf_counter()
    write_sessions(store, count)
    written = time.perf_counter() - started
    with httpx.Client(timeout=600) as client:
        with server(store, index) as url:
            cold, size = ttfb(client, url + "/")
            warm = median(ttfb(client, url + "/")[0] for _ in range(5))
            sorted_ = median(
                ttfb(client, url + "/?sort=prompt&order=asc&page=7")[0] for _ in range(3)
            )
            audited = _wait_audited(client, url)
        with server(store, index) as url:
            restart = ttfb(client, url + "/")[0]
    return {
        "sessions": count,
        "write_s": round(written, 2),
        "page_kb": round(size / 1024),
        "ttfb_cold_s": round(cold, 3),
        "ttfb_warm_s": round(warm, 3),
        "ttfb_warm_sorted_page7_s": round(sorted_, 3),
        "ttfb_restart_s": round(restart, 3),
        "audited_all_s": audited,
        "index_file_kb": round(index.stat().st_size / 1024),
    }


def _wait_audited(client: httpx.Client, url: str, limit: float = 600) -> float | None:
    """Seconds until the page no longer says some sessions await their audit."""
    start = time.perf_counter()
    while time.perf_counter() - start < limit:
        if "cache efficiency audited for" not in client.get(url + "/").text:
            return round(time.perf_counter() - start, 1)
        time.sleep(2)
    return None


def _parse_every_line(path: Path) -> int:
    lines = path.read_bytes().split(b"\n")
    return sum(1 for line in lines if line and orjson.loads(line) is not None)


def session_page(root: Path, steps: int) -> dict[str, Any]:
    store_dir, index = root / "long", root / "long.index"
    session = build(steps, "deepseek")
    store = JsonlStore(store_dir)
    with store.create(session) as writer:
        writer.flush()
    path = store.path(session.id)
    start = time.perf_counter()
    _parse_every_line(path)
    parse = time.perf_counter() - start
    start = time.perf_counter()
    store.load(session.id)
    load = time.perf_counter() - start
    with httpx.Client(timeout=600) as client, server(store_dir, index) as url:
        page = f"{url}/s/{session.id}"
        cold, size = ttfb(client, page)
        warm = median(ttfb(client, page)[0] for _ in range(3))
        first_window = ttfb(client, page + "?req=1")[0]
    return {
        "steps": steps,
        "events": len(session),
        "log_mb": round(os.path.getsize(path) / 1e6, 1),
        "parse_s": round(parse, 3),
        "load_s": round(load, 3),
        "page_kb": round(size / 1024),
        "ttfb_cold_s": round(cold, 3),
        "ttfb_warm_s": round(warm, 3),
        "ttfb_warm_first_window_s": round(first_window, 3),
        "cold_over_parse": round(cold / parse, 1),
        "warm_over_parse": round(warm / parse, 2),
        "cold_over_load": round(cold / load, 2),
    }


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--steps", type=int, default=10_000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        out = {
            "sessions_page": sessions_page(Path(tmp), args.sessions),
            "session_page": session_page(Path(tmp), args.steps),
        }
    print(encode_str(out))


if __name__ == "__main__":
    main(sys.argv[1:])
