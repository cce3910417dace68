"""How long the agent loop holds its event loop from other tasks; prints one JSON object.

    .venv/bin/python bench/bench_ticker.py [--steps 1000] [--runs 3] [--dir DIR] [--in-process]

A 1,000-step session (``--steps``) runs against the emulator (DeepSeek route;
two tool-calling steps and an answer per turn, the checker on) into a real
store, while a **ticker** task on the same event loop sleeps 1 ms in a loop
and records how late each wake-up is (actual sleep minus 1 ms). Whatever holds
the event loop shows up as lateness: the loop's own work between two awaits
(the step's prepare, check and encode, logging chunks) and anything that
blocks, such as a store flush (one ``write`` + ``fsync`` for the JSONL store,
one ``COPY`` transaction for PostgreSQL). The store flushes before every
request, after the ``tool/call`` events and at turn end: about two per step.

The emulator is the provider: by default it is the same ``Emulator`` with the
same script, served on a loopback port by a child process (``tapelog
emulator``), so that its own work (cache accounting and wire checks that grow
with the prompt: most of the CPU time of an in-process run) does not run on
the measured event loop, as a real provider's would not. ``--in-process``
serves it on the measured loop through httpx's ASGI transport instead; its
work then dominates every mode's lateness.

Modes, run in turn ``--runs`` times each after a short warm-up (the machine
is shared, so each figure is the median over runs; the per-run worst and p99
are listed too):

``no_store``: no writer at all: the floor, the loop's own work.
``on_loop``: the store's ``flush()`` runs on the event loop's thread, as the
  loop did before issue 9 (the writer is handed to the Agent wrapped in an
  object whose ``aflush`` calls ``flush()`` directly, which the Agent awaits
  in place of its off-loop flush).
``off_loop``: the Agent's default: the plain writer, whose ``flush()`` the
  Agent runs in a worker thread and awaits.

Per mode: the ticker's lateness over the whole run (``worst_ms``, ``p99_ms``,
``p50_ms``, ``ticks``); ``flush_stall``, per flush the longest stretch of it
in which no tick woke up (the event loop served nothing else: the whole flush
when it runs on the loop, about a tick when it does not), its worst, p99 and
total over the flushes: what the flushes themselves cost other tasks, apart
from the stalls that have nothing to do with them (the loop's own work, a
garbage collection, the machine running another process); the flushes
(``flushes``; ``flush_total_ms`` and ``flush_worst_ms``, the time spent
inside ``flush()`` wherever it ran; ``flush_on_loop_ms``, the part of it on
the event loop's own thread), the longest garbage collection
(``gc_worst_ms``: a stall of the event loop a long session has whatever the
store, which explains most of the worst lateness) and the wall time. ``ratios`` divides
``on_loop`` by ``off_loop`` (how much worse the old path is) and both by
``no_store`` (1.0: nothing of the store's cost is left on the event loop).

The JSONL store syncs every flush (``fsync``); its files go to a temporary
directory under ``--dir`` (default: the system's), so the figures depend on
that file system. When ``TAPELOG_TEST_PG`` names a PostgreSQL
server (a libpq connection string), the two store modes also run on a
``PostgresStore``, in a schema the bench creates and drops.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import gc
import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any

import httpx

from tapelog.agent import Agent, RetryPolicy, tool
from tapelog.emulator import Emulator
from tapelog.llm import make_client
from tapelog.log._api import LlmCallConfig, Session, encode_str
from tapelog.store import JsonlStore, SessionStore, SessionWriter

STEPS = 1_000
RUNS = 3
STEPS_PER_TURN = 3  # two tool-calling steps, then a text answer
TICK = 0.001  # the ticker's sleep, in seconds
MODES = ("no_store", "on_loop", "off_loop")
SYSTEM = "\n".join(f"Rule {i}: read the notes before answering." for i in range(20))
CONFIG = LlmCallConfig(provider="deepseek", model="deepseek-chat", max_tokens=512)
KEY = "sk-bench-ticker-not-a-real-key"


@tool
def lookup(key: str) -> str:
    """Look a key up in the project notes.

    Args:
        key: The note to read.
    """
    return f"{key}: the notes say nothing more."


def _script(steps: int) -> list[dict[str, Any]]:
    """The emulator's answers: per turn, two tool calls then a text answer."""
    entries: list[dict[str, Any]] = []
    for step in range(1, steps + STEPS_PER_TURN + 1):
        if step % STEPS_PER_TURN:
            call = {"name": "lookup", "arguments": f'{{"key": "note-{step}"}}'}
            entries.append({"text": "Let me look.", "tool_calls": [call]})
        else:
            entries.append({"text": f"Answer {step}: the notes say nothing more."})
    return entries


@dataclass(frozen=True, slots=True)
class _Edge:
    """Where the emulator answers: an HTTP client and the DeepSeek route's base URL."""

    http: httpx.AsyncClient
    url: str


class _TimedWriter:
    """A store writer whose flushes are timed, with the thread each ran on
    (the bench's bookkeeping only)."""

    def __init__(self, inner: SessionWriter) -> None:
        self.inner = inner
        self.spans: list[tuple[float, float, int]] = []  # start, end, thread id

    def flush(self) -> None:
        started = time.perf_counter()
        self.inner.flush()
        self.spans.append((started, time.perf_counter(), threading.get_ident()))


class _OnLoop:
    """The code path before issue 9: ``flush()`` on the event loop's own thread."""

    def __init__(self, inner: _TimedWriter) -> None:
        self.inner = inner

    def flush(self) -> None:
        self.inner.flush()

    async def aflush(self) -> None:
        self.inner.flush()


@contextmanager
def _collections() -> Iterator[list[float]]:
    """The duration of each garbage collection while the block runs (the
    other stalls of the event loop a long session has: they explain most of
    the worst lateness, store or no store)."""
    durations: list[float] = []
    started = [0.0]

    def callback(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            durations.append(time.perf_counter() - started[0])

    gc.callbacks.append(callback)
    try:
        yield durations
    finally:
        gc.callbacks.remove(callback)


async def _ticker(stop: asyncio.Event, ticks: list[tuple[float, float]]) -> None:
    """Sleep ``TICK`` again and again, keeping each sleep's start and end."""
    while not stop.is_set():
        started = time.perf_counter()
        await asyncio.sleep(TICK)
        ticks.append((started, time.perf_counter()))


def _stalls(ticks: list[tuple[float, float]], spans: list[tuple[float, float, int]]) -> list[float]:
    """Per flush: the longest stretch of it in which no tick woke up, i.e. the
    event loop ran nothing else (the whole flush when it ran on the loop)."""
    woke = [end for _, end in ticks]
    stalls: list[float] = []
    for start, end, _ in spans:
        inside = woke[bisect.bisect_left(woke, start) : bisect.bisect_right(woke, end)]
        points = [start, *inside, end]
        stalls.append(max(b - a for a, b in itertools.pairwise(points)))
    return stalls


def _stall_figures(stalls: list[float]) -> dict[str, float]:
    if not stalls:
        return {"worst_ms": 0.0, "p99_ms": 0.0, "total_ms": 0.0}
    return {
        "worst_ms": round(max(stalls) * 1e3, 3),
        "p99_ms": round(_percentile(stalls, 0.99) * 1e3, 3),
        "total_ms": round(sum(stalls) * 1e3, 1),
    }


def _lateness(values: list[float]) -> dict[str, float]:
    if not values:
        return {"ticks": 0, "worst_ms": 0.0, "p99_ms": 0.0, "p50_ms": 0.0}
    return {
        "ticks": len(values),
        "worst_ms": round(max(values) * 1e3, 3),
        "p99_ms": round(_percentile(values, 0.99) * 1e3, 3),
        "p50_ms": round(_percentile(values, 0.5) * 1e3, 3),
    }


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@asynccontextmanager
async def _provider(script: list[dict[str, Any]], in_process: bool) -> AsyncIterator[_Edge]:
    """The emulator answering ``script``: in this process, or a loopback server in a child."""
    if in_process:
        emulator = Emulator(script=script, keep_requests=4)
        async with httpx.AsyncClient(transport=emulator.transport(), timeout=60) as http:
            yield _Edge(http, "http://emulator/deepseek")
        return
    with tempfile.TemporaryDirectory(prefix="tapelog-ticker-script-") as tmp:
        path = os.path.join(tmp, "script.jsonl")
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(encode_str(entry) + "\n" for entry in script)
        command = "from tapelog.cli import main; main()"
        args = [sys.executable, "-c", command, "emulator", "--port", "0", "--script", path]
        child = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            assert child.stdout is not None
            url = next(line.split()[1] for line in child.stdout if line.startswith("deepseek "))
            async with httpx.AsyncClient(timeout=60) as http:
                yield _Edge(http, url)
        finally:
            child.terminate()
            child.wait(timeout=30)


async def _session(
    store: SessionStore | None, mode: str, steps: int, in_process: bool
) -> dict[str, Any]:
    """One session of ``steps`` steps with the ticker running; its figures."""
    session = Session()
    writer = store.create(session) if store is not None and mode != "no_store" else None
    timed = _TimedWriter(writer) if writer is not None else None
    flushable: Any = None if timed is None else _OnLoop(timed) if mode == "on_loop" else timed
    ticks: list[tuple[float, float]] = []
    stop = asyncio.Event()
    try:
        async with _provider(_script(steps), in_process) as edge:
            client = make_client(
                CONFIG, base_url=edge.url, http_client=edge.http, env={"DEEPSEEK_API_KEY": KEY}
            )
            agent = Agent(
                session,
                client,
                config=CONFIG,
                system=SYSTEM,
                tools=[lookup],
                writer=flushable,
                max_steps=STEPS_PER_TURN,
                retry=RetryPolicy(base_delay=0.0),
            )
            ticker = asyncio.create_task(_ticker(stop, ticks))
            await asyncio.sleep(10 * TICK)  # the ticker is running
            ticks.clear()
            loop_thread = threading.get_ident()
            started = time.perf_counter()
            done = turn = 0
            with _collections() as collections:
                while done < steps:
                    turn += 1
                    result = await agent.run(f"Question {turn}: what do the notes say?")
                    assert result.reason["kind"] == "completed", result.reason
                    done += result.steps
            wall = time.perf_counter() - started
            stop.set()
            await ticker
    finally:
        if writer is not None:
            writer.close()
    spans = timed.spans if timed is not None else []
    late = [end - start - TICK for start, end in ticks]
    durations = [end - start for start, end, _ in spans]
    return {
        "steps": done,
        "wall_s": round(wall, 3),
        **_lateness(late),
        "flush_stall": _stall_figures(_stalls(ticks, spans)),
        "flushes": len(spans),
        "flush_total_ms": round(sum(durations) * 1e3, 1),
        "flush_worst_ms": round(max(durations, default=0.0) * 1e3, 3),
        "flush_on_loop_ms": round(
            sum(end - start for start, end, thread in spans if thread == loop_thread) * 1e3, 1
        ),
        "gc_worst_ms": round(max(collections, default=0.0) * 1e3, 3),
    }


_KEYS = (
    "worst_ms",
    "p99_ms",
    "p50_ms",
    "ticks",
    "wall_s",
    "flushes",
    "flush_total_ms",
    "flush_on_loop_ms",
)


def _median(runs: list[dict[str, Any]], key: str) -> float:
    return round(float(statistics.median(r[key] for r in runs)), 3)


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {k: _median(runs, k) for k in _KEYS}
    stalls = [r["flush_stall"] for r in runs]
    out["flush_stall"] = {k: _median(stalls, k) for k in ("worst_ms", "p99_ms", "total_ms")}
    out["flush_worst_ms"] = max(r["flush_worst_ms"] for r in runs)
    out["gc_worst_ms"] = max(r["gc_worst_ms"] for r in runs)
    out["worst_ms_per_run"] = [r["worst_ms"] for r in runs]
    out["p99_ms_per_run"] = [r["p99_ms"] for r in runs]
    return out


def _ratios(modes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    def ratio(a: dict[str, Any], b: dict[str, Any], key: str) -> float | None:
        return round(a[key] / b[key], 2) if b[key] else None

    out: dict[str, Any] = {}
    for a, b in (("on_loop", "off_loop"), ("off_loop", "no_store"), ("on_loop", "no_store")):
        if a in modes and b in modes:
            out[f"{a}_over_{b}"] = {k: ratio(modes[a], modes[b], k) for k in ("worst_ms", "p99_ms")}
    if "on_loop" in modes and "off_loop" in modes:
        on, off = modes["on_loop"]["flush_stall"], modes["off_loop"]["flush_stall"]
        out["flush_stall_on_loop_over_off_loop"] = {
            k: ratio(on, off, k) for k in ("worst_ms", "p99_ms", "total_ms")
        }
    return out


def bench(
    stores: Callable[[], Any], modes: tuple[str, ...], steps: int, runs: int, in_process: bool
) -> dict[str, Any]:
    """Each mode ``runs`` times, interleaved; per-mode medians and the ratios."""
    results: dict[str, list[dict[str, Any]]] = {mode: [] for mode in modes}
    with stores() as store:  # warm up: imports, first-call costs, the disk
        asyncio.run(_session(store, modes[-1], STEPS_PER_TURN * 10, in_process))
    for _ in range(runs):
        for mode in modes:
            with stores() as store:
                results[mode].append(asyncio.run(_session(store, mode, steps, in_process)))
    summaries = {mode: _summary(r) for mode, r in results.items()}
    return {"modes": summaries, "ratios": _ratios(summaries)}


def _jsonl_stores(root: str | None) -> Callable[[], Any]:
    @contextmanager
    def stores() -> Iterator[SessionStore]:
        with tempfile.TemporaryDirectory(prefix="tapelog-ticker-", dir=root) as tmp:
            yield JsonlStore(tmp)

    return stores


def _pg_stores(conninfo: str) -> Callable[[], Any]:
    from psycopg import connect, sql

    from tapelog.store import PostgresStore

    @contextmanager
    def stores() -> Iterator[SessionStore]:
        schema = f"bench_ticker_{os.getpid()}_{time.monotonic_ns()}"
        try:
            yield PostgresStore(conninfo, schema=schema)
        finally:
            with connect(conninfo, autocommit=True) as conn:
                conn.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
                )

    return stores


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--steps", type=int, default=STEPS, help="steps per session")
    parser.add_argument("--runs", type=int, default=RUNS, help="sessions per mode")
    parser.add_argument("--dir", default=None, help="where the JSONL store's temporary files go")
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="serve the emulator on the measured event loop (its work then dominates)",
    )
    args = parser.parse_args()
    started = time.perf_counter()
    result: dict[str, Any] = {
        "python": sys.version.split()[0],
        "steps": args.steps,
        "runs": args.runs,
        "tick_ms": TICK * 1e3,
        "emulator": "in-process" if args.in_process else "child process",
        "jsonl": bench(_jsonl_stores(args.dir), MODES, args.steps, args.runs, args.in_process),
    }
    conninfo = os.environ.get("TAPELOG_TEST_PG")
    if conninfo:
        pg = _pg_stores(conninfo)
        result["postgres"] = bench(pg, MODES[1:], args.steps, args.runs, args.in_process)
    result["seconds"] = round(time.perf_counter() - started, 1)
    print(encode_str(result))


if __name__ == "__main__":
    main()
