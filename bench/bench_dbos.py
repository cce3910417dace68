"""Durable turns under fire: workers SIGKILLed at random while they run queued turns.

    .venv/bin/python bench/bench_dbos.py                       # 3 workers, 100 turns, 20 sessions
    .venv/bin/python bench/bench_dbos.py --workers 6 --turns 1000 --sessions 100

Starts ``--workers`` real ``tapelog worker`` processes on one PostgreSQL
database (a throwaway server, or ``--pg``), the provider emulator on a loopback
port (``tapelog emulator``'s server, in this process so the bodies it received
can be checked, each answer held back ``--delay`` seconds so that kills land in
the middle of turns), enqueues ``--turns`` turns over ``--sessions`` sessions
(``tapelog.dbos.TurnQueue``), then SIGKILLs a random worker every
``--kill-every`` seconds (a random time in the range) and starts a new one,
until every turn has finished. The emulator's script makes about one answer
in three a call of the ``read_file`` tool, so kills also land while a tool runs.

Then it checks what the test (tests/durable/test_recovery.py, which runs it
small) asserts: every turn finished ``completed``; every session holds each of
its turns' prompts exactly once, in the order they were enqueued; every session
verifies; every tool call has exactly one result; every body the emulator
received is one the log rebuilds, byte for byte. Prints one JSON object: the
figures, and ``problems`` (empty, or the run failed).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # its loopback server

from _pgserver import throwaway_server

from proxy._helpers import serve
from tapelog.audit import encode_request, rebuild_requests
from tapelog.dbos import TurnQueue
from tapelog.emulator import Emulator
from tapelog.store import PostgresStore
from tapelog.store._api import verify_jsonl

_WORKER = "from tapelog.cli import main; main()"
_TOOL = {"tool_calls": [{"name": "read_file", "arguments": '{"path": "notes.txt"}'}]}


def _slowed(app: Any, delay: float) -> Any:
    """``app`` answering each request ``delay`` seconds late (a model's think time)."""

    async def slowed(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            await asyncio.sleep(delay)
        await app(scope, receive, send)

    return slowed


class _Workers:
    """The worker processes: started, killed, restarted, stopped."""

    def __init__(self, argv: list[str], logs: Path) -> None:
        self.argv, self.logs, self.started = argv, logs, 0
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self) -> subprocess.Popen[bytes]:
        self.started += 1
        with (self.logs / f"worker-{self.started}.log").open("wb") as log:
            proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT)
        self.procs.append(proc)
        return proc

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Until every worker started so far says it runs turns (the first one
        creates DBOS's tables, which enqueueing needs)."""
        deadline = time.monotonic() + timeout
        for n in range(1, self.started + 1):
            log = self.logs / f"worker-{n}.log"
            while b"running turns from" not in log.read_bytes():
                if time.monotonic() > deadline:
                    raise SystemExit(f"worker {n} did not start: {log.read_text()[-2000:]}")
                time.sleep(0.1)

    def kill_one(self, rng: random.Random) -> None:
        alive = [p for p in self.procs if p.poll() is None]
        victim = rng.choice(alive)
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        self.procs.remove(victim)
        self.start()

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _statuses(queue: TurnQueue, keys: Sequence[str]) -> collections.Counter[str]:
    return collections.Counter(queue.statuses(keys).values())


def check(
    store: PostgresStore, emulator: Emulator, queue: TurnQueue, keys: dict[str, list[str]]
) -> tuple[list[str], dict[str, int]]:
    """What went wrong (nothing, when all is well), and counts of what happened."""
    problems: list[str] = []
    counts = collections.Counter[str]()
    rebuilt = collections.Counter[bytes]()
    for session_id, wanted in keys.items():
        for key in wanted:
            outcome = queue.result(key)
            counts[f"ran_{outcome['ran']}"] += 1
            if outcome["reason"] != {"kind": "completed"}:
                problems.append(f"turn {key} of {session_id} ended {outcome['reason']}")
        data = store.session_bytes(session_id)
        report = verify_jsonl(data, expected_id=session_id)
        if not report.ok:
            problems.append(f"session {session_id} does not verify: {report.problems[:3]}")
        session = store.load(session_id).session
        logged = [e.data.get("idempotency_key") for e in session.events if e.type == "user/message"]
        if logged != wanted:
            problems.append(f"session {session_id}: prompts {logged}, enqueued {wanted}")
        answered = collections.Counter(
            e.data["call_id"] for e in session.events if e.type == "tool/result"
        )
        calls = [e.data["call_id"] for e in session.events if e.type == "tool/call"]
        if sorted(calls) != sorted(answered) or any(n != 1 for n in answered.values()):
            problems.append(f"session {session_id}: tool calls {calls}, results {answered}")
        counts["tool_calls"] += len(calls)
        for event in session.events:
            if event.type == "turn/end" and event.data["reason"]["kind"] == "interrupted":
                counts["interrupted_turns"] += 1
            if event.type == "tool/result" and event.data.get("error", {}) == {
                "kind": "interrupted"
            }:
                counts["tool_calls_closed_by_repair"] += 1
        rebuilt.update(encode_request(r.request) for r in rebuild_requests(session))
    received = collections.Counter(r.body for r in emulator.received)
    missing = received - rebuilt
    if missing:
        problems.append(f"{sum(missing.values())} bodies the emulator received do not rebuild")
    counts["requests_received"] = sum(received.values())
    return problems, dict(counts)


def campaign(
    conninfo: str,
    *,
    workers: int = 3,
    sessions: int = 20,
    turns: int = 100,
    kill_every: tuple[float, float] = (2.0, 4.0),
    kill_at: tuple[int, ...] = (),
    delay: float = 0.15,
    concurrency: int = 4,
    timeout: float = 600.0,
    seed: int = 19,
) -> dict[str, Any]:
    """Run the campaign on the server ``conninfo`` (module docstring); its figures.

    Besides a kill every ``kill_every`` seconds, a worker is killed as the
    count of finished turns first reaches each of ``kill_at``: a fast machine
    finishes the turns before many timed kills come due, and a test wants
    kills it can count on."""
    rng = random.Random(seed)
    tag = uuid.uuid4().hex[:10]
    schema, dbos_schema = f"dbos_turns_{tag}", f"dbos_{tag}"
    store = PostgresStore(conninfo, schema=schema)
    emulator = Emulator(script=[_TOOL, {"text": "noted"}, {"text": "noted"}] * (turns // 2))
    with contextlib.ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-dbos-")))
        (work / "ws").mkdir()
        (work / "ws" / "notes.txt").write_text("the notes a tool reads\n")
        port = stack.enter_context(serve(_slowed(emulator.app, delay)))
        argv = [sys.executable, "-c", _WORKER, "worker", "--store", f"{conninfo} schema={schema}"]
        argv += ["--provider", "emulator", "--base-url", f"http://127.0.0.1:{port}/v1"]
        argv += ["--tools", "fs", "--workspace", str(work / "ws"), "--dbos-schema", dbos_schema]
        argv += ["--concurrency", str(concurrency)]
        pool = _Workers(argv, work)
        stack.callback(pool.stop)
        for _ in range(workers):
            pool.start()
        pool.wait_ready()
        queue = stack.enter_context(TurnQueue(store, system_schema=dbos_schema))
        keys: dict[str, list[str]] = {f"s{k}": [] for k in range(sessions)}
        began = time.monotonic()
        for n in range(turns):
            session_id = f"s{n % sessions}"
            keys[session_id].append(queue.enqueue(session_id, f"question {n}"))
        everything = [k for each in keys.values() for k in each]
        kills = 0
        next_kill = time.monotonic() + rng.uniform(*kill_every)
        marks = sorted(kill_at)
        while (done := _statuses(queue, everything))["SUCCESS"] < turns:
            if marks and done["SUCCESS"] >= marks[0]:
                while marks and done["SUCCESS"] >= marks[0]:
                    marks.pop(0)
                pool.kill_one(rng)
                kills += 1
            if done["ERROR"] or time.monotonic() - began > timeout:
                tails = [(work / f"worker-{n}.log").read_text()[-2000:] for n in (1, pool.started)]
                raise SystemExit(f"turns stuck or failed after {kills} kills: {done}; {tails}")
            if time.monotonic() >= next_kill:
                pool.kill_one(rng)
                kills += 1
                next_kill = time.monotonic() + rng.uniform(*kill_every)
            time.sleep(0.2)
        seconds = time.monotonic() - began
        pool.stop()
        problems, counts = check(store, emulator, queue, keys)
    _drop(conninfo, schema, dbos_schema)
    return {
        "workers": workers,
        "sessions": sessions,
        "turns": turns,
        "kills": kills,
        "workers_started": pool.started,
        "seconds": round(seconds, 1),
        **counts,
        "problems": problems,
    }


def _drop(conninfo: str, *schemas: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(conninfo, autocommit=True) as conn:
        for schema in schemas:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@contextlib.contextmanager
def _server(pg: str | None) -> Iterator[str]:
    if pg:
        yield pg
    else:
        with throwaway_server(fsync=True) as conninfo:
            yield conninfo


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--kill-every", default="2,4", help="MIN,MAX seconds between kills")
    parser.add_argument("--delay", type=float, default=0.15, help="each answer's delay (s)")
    parser.add_argument("--concurrency", type=int, default=4, help="turns per worker at once")
    parser.add_argument("--pg", help="a libpq conninfo (default: a throwaway server)")
    args = parser.parse_args(argv)
    low, high = (float(x) for x in args.kill_every.split(","))
    with _server(args.pg) as conninfo:
        result = campaign(
            conninfo,
            workers=args.workers,
            sessions=args.sessions,
            turns=args.turns,
            kill_every=(low, high),
            delay=args.delay,
            concurrency=args.concurrency,
        )
    print(json.dumps(result, indent=2))
    if result["problems"]:
        sys.exit(1)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
