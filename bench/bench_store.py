"""Benchmark of the stores' write path; run by hand, prints one JSON object.

    .venv/bin/python bench/bench_store.py                 # JSONL and a throwaway PostgreSQL
    .venv/bin/python bench/bench_store.py --pg 'host=db dbname=tapelog' --writers 1,10,100

For each backend and each number of concurrent writers (1, 10 and 100 by
default), every writer is one process with its own session and writer (its own
connection on PostgreSQL), appending an agent-like event mix
(``bench_log.event_mix``: prompts, streamed chunks, messages, tool calls and
results) and flushing every ``--flush-every`` events, as a loop flushes at each
step. Durability is on: the JSONL store fsyncs every flush; the throwaway
PostgreSQL server runs with ``fsync`` and ``synchronous_commit`` on.

By default the writers go flat out, which measures throughput (and, on a
machine with fewer cores than writers, flush times that include waiting for a
core); ``--pause-ms`` makes each writer pause after each flush, as an agent
waits for its model, which measures a flush's latency under a given load.

Per run: ``appends_per_s`` (events stored, the flushes' ``log/digest`` events
included, per second of wall time from the first append to the last close),
``flush_p50_ms`` / ``flush_p99_ms`` over every flush of every writer, and
``lost``: events appended but not found when each session is loaded again
afterwards (always 0, or the store is broken).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _pgserver import throwaway_server
from bench_log import event_mix

from tapelog.log._api import Session
from tapelog.store import JsonlStore, PostgresStore, SessionStore

Payload = tuple[str, dict[str, Any], str | None]


def _writer(
    store: SessionStore,
    session_id: str,
    payloads: Sequence[Payload],
    flush_every: int,
    pause: float,
    start: Any,
    out: Any,
) -> None:
    """One writer process: create the session, wait for the others, append and
    flush; sends its flush durations (or its error) back on ``out``."""
    try:
        session = Session(session_id)
        flushes: list[float] = []
        with store.create(session) as writer:
            start.wait()
            for k, (etype, data, op) in enumerate(payloads, start=1):
                session.append(etype, data, surface_op=op)
                if k % flush_every == 0 or k == len(payloads):
                    began = time.perf_counter()
                    writer.flush()
                    flushes.append(time.perf_counter() - began)
                    time.sleep(pause)
        out.send(flushes)
    except BaseException as exc:
        start.abort()
        out.send(f"{type(exc).__name__}: {exc}")


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def run_one(
    store: SessionStore,
    backend: str,
    writers: int,
    events: int,
    flush_every: int,
    pause: float = 0.0,
) -> dict[str, Any]:
    """``writers`` processes appending ``events`` events each to their own session.

    Processes, not threads: each agent or proxy writes from its own process, and
    threads of one process would measure the GIL's hand-offs, not the store.
    """
    stream = event_mix()
    payloads = [next(stream) for _ in range(events)]
    prefix = f"bench-{writers}-{uuid.uuid4().hex[:8]}"
    ids = [f"{prefix}-{i}" for i in range(writers)]
    context = multiprocessing.get_context("fork")
    start = context.Barrier(writers + 1)
    pipes = [context.Pipe(duplex=False) for _ in ids]
    procs = [
        context.Process(target=_writer, args=(store, i, payloads, flush_every, pause, start, send))
        for i, (_, send) in zip(ids, pipes, strict=True)
    ]
    for proc in procs:
        proc.start()
    start.wait()
    began = time.perf_counter()
    answers = [receive.recv() for receive, _ in pipes]
    seconds = time.perf_counter() - began
    for proc in procs:
        proc.join()
    failed = [a for a in answers if isinstance(a, str)]
    if failed:
        raise SystemExit(f"a writer failed: {failed[0]}")
    every = [f for each in answers for f in each]
    per_writer = events + len(answers[0])  # its events and one log/digest per flush
    stored = sum(len(store.load(i).session) for i in ids)
    return {
        "backend": backend,
        "writers": writers,
        "events": writers * per_writer,
        "flushes": len(every),
        "seconds": round(seconds, 3),
        "appends_per_s": round(writers * per_writer / seconds),
        "flush_p50_ms": round(statistics.median(every) * 1000, 2),
        "flush_p99_ms": round(_percentile(every, 0.99) * 1000, 2),
        "lost": writers * per_writer - stored,
        "pause_ms": pause * 1000,
    }


@contextlib.contextmanager
def _stores(backends: Sequence[str], pg: str | None) -> Iterator[dict[str, SessionStore]]:
    with contextlib.ExitStack() as stack:
        stores: dict[str, SessionStore] = {}
        if "jsonl" in backends:
            root = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-store-"))
            stores["jsonl"] = JsonlStore(root)
        if "postgres" in backends:
            conninfo = pg if pg else stack.enter_context(throwaway_server(fsync=True))
            schema = "bench_" + uuid.uuid4().hex[:12]
            stores["postgres"] = PostgresStore(conninfo, schema=schema)
            stack.callback(_drop_schema, conninfo, schema)
        yield stores


def _drop_schema(conninfo: str, schema: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def bench(
    *,
    writers: Sequence[int] = (1, 10, 100),
    events: int = 400,
    flush_every: int = 20,
    backends: Sequence[str] = ("jsonl", "postgres"),
    pg: str | None = None,
    pause: float = 0.0,
) -> dict[str, Any]:
    """Every backend × every writer count (see the module docstring)."""
    with _stores(backends, pg) as stores:
        results = [
            run_one(store, name, n, events, flush_every, pause)
            for name, store in stores.items()
            for n in writers
        ]
    return {
        "fsync": True,
        "events_per_writer": events,
        "flush_every": flush_every,
        "results": results,
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--writers", default="1,10,100", help="comma-separated counts")
    parser.add_argument("--events", type=int, default=400, help="events each writer appends")
    parser.add_argument("--flush-every", type=int, default=20, help="events between flushes")
    parser.add_argument("--backends", default="jsonl,postgres")
    parser.add_argument("--pg", help="a libpq conninfo (default: a throwaway server, fsync on)")
    parser.add_argument(
        "--pause-ms",
        type=float,
        default=0.0,
        help="each writer's pause after a flush (a model's answer time; default 0: flat out)",
    )
    args = parser.parse_args(argv)
    result = bench(
        writers=[int(n) for n in args.writers.split(",")],
        events=args.events,
        flush_every=args.flush_every,
        backends=args.backends.split(","),
        pg=args.pg,
        pause=args.pause_ms / 1000,
    )
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
