"""Benchmark of proxy replicas behind HAProxy on PostgreSQL; prints one JSON object.

    TAPELOG_TEST_PG="host=/tmp/pg dbname=postgres user=postgres" \\
        .venv/bin/python bench/bench_replicas.py [--levels 1,10,50] [--turns 10] [--large] [--kill]

As users deploy them: 3 ``tapelog proxy`` replicas (real processes, invariant
checker on as by default) on one PostgreSQL store (a schema of its own per
level, dropped after), Debian's HAProxy round robin in front
(``tests/proxy/_balanced.py``: the same setup the replica test runs small), the
emulator as the upstream, and concurrent conversations through the async
``openai`` SDK, every other turn streamed. Per level of concurrency (how many
conversations run at once, each ``--turns`` turns): the same conversations
straight to the emulator (``direct``) and through HAProxy and a replica
(``proxied``); ``added_p50_ms`` and ``added_p99_ms`` are the differences of
the per-request latency percentiles (the balancer's hop, the replica's match
against the store's index, reopening the session, logging, flushing,
recording the point, releasing the session). ``--large`` adds 200
conversations and 20 turns; ``--kill`` also runs the largest level with a
replica SIGKILLed a third of the way and restarted, and checks what the test
checks (one session per conversation, every received body rebuilds).

The PostgreSQL server is ``$TAPELOG_TEST_PG`` (a conninfo string), as for the
store tests. Client, emulator and replicas share this machine's cores, so the
figures are what one machine does with everything on it, not a capacity plan.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from proxy._balanced import Played, campaign, haproxy, play, summary
from proxy._helpers import own_requests, serve
from proxy._replicas import replicas, stored_sessions
from tapelog.emulator import Emulator
from tapelog.store import PostgresStore

REPLICAS = 3
SAMPLES = 200


def _url(conninfo: str, schema: str) -> str:
    from urllib.parse import quote

    from psycopg.conninfo import conninfo_to_dict

    params = conninfo_to_dict(conninfo)
    query = "&".join(f"{k}={quote(str(v), safe='')}" for k, v in params.items())
    return f"postgresql://?{query}&schema={schema}"


def _drop(conninfo: str, schema: str) -> None:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def level(conninfo: str, conversations: int, turns: int, *, kill: bool) -> dict[str, Any]:
    """One level: direct, then proxied (or the kill campaign); its figures."""
    schema = f"bench_replicas_{conversations}_{os.getpid()}"
    _drop(conninfo, schema)
    upstream = Emulator(keep_requests=conversations * turns * 4)
    out: dict[str, Any] = {"conversations": conversations, "turns": turns}
    # At least SAMPLES requests per level (rounds of new conversations), direct
    # and proxied in turn, so that load from elsewhere falls on both alike.
    rounds = 1 if kill else max(1, SAMPLES // (conversations * turns))
    direct, proxied = Played([]), Played([])
    try:
        with (
            tempfile.TemporaryDirectory() as tmp,
            serve(upstream.app) as port,
            replicas(_url(conninfo, schema), port, REPLICAS, Path(tmp)) as reps,
            haproxy(Path(tmp), reps) as base,
        ):
            for r in range(rounds):
                tag = f"round {r}: "
                got = asyncio.run(play(f"http://127.0.0.1:{port}/deepseek", conversations, turns))
                direct.latencies += got.latencies
                upstream.received.clear()
                if kill:
                    got, _ = asyncio.run(campaign(base, reps, conversations, turns))
                else:
                    got = asyncio.run(play(base, conversations, turns, tag=tag))
                proxied.latencies += got.latencies
                proxied.retried += got.retried
        d, p = summary(direct.latencies), summary(proxied.latencies)
        out |= {"direct": d, "proxied": p, "retried": proxied.retried}
        out["added_p50_ms"] = round(p["p50_ms"] - d["p50_ms"], 2)
        out["added_p99_ms"] = round(p["p99_ms"] - d["p99_ms"], 2)
        if kill:
            sessions = stored_sessions(PostgresStore(conninfo, schema=schema))
            rebuilt = Counter(b for s in sessions.values() for b in own_requests(s))
            received = Counter(r.body for r in upstream.received)
            out["killed"] = {
                "sessions": len(sessions),
                "one_session_each": len(sessions) == conversations,
                "received_not_rebuilt": (received - rebuilt).total(),
                "logged_not_sent": (rebuilt - received).total(),
            }
    finally:
        _drop(conninfo, schema)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--levels", default="1,10,50")
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--large", action="store_true", help="add 200 conversations, 20 turns")
    parser.add_argument("--kill", action="store_true", help="also the kill campaign")
    args = parser.parse_args()
    conninfo = os.environ.get("TAPELOG_TEST_PG")
    if not conninfo:
        parser.error("set TAPELOG_TEST_PG to a PostgreSQL conninfo string")
    levels = [int(x) for x in args.levels.split(",")]
    turns = args.turns
    if args.large:
        levels, turns = sorted({*levels, 200}), max(turns, 20)
    results = [level(conninfo, c, turns, kill=False) for c in levels]
    report: dict[str, Any] = {"replicas": REPLICAS, "levels": results}
    if args.kill:
        report["kill"] = level(conninfo, max(levels), turns, kill=True)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
