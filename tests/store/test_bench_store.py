"""bench/bench_store.py, run small: its JSON has the shape docs/scale.md quotes, and
every event each writer appended is stored (on JSONL and on PostgreSQL)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import psycopg
from psycopg import sql

from store.test_postgres import pg_conninfo

__all__ = ["pg_conninfo"]  # the imported fixture

BENCH = Path(__file__).resolve().parents[2] / "bench" / "bench_store.py"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_store", BENCH)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_store", module)
    spec.loader.exec_module(module)
    return module


def test_the_store_bench_reports_rates_and_flush_times_and_loses_nothing(pg_conninfo: str) -> None:
    result = _bench().bench(writers=(1, 3), events=45, flush_every=10, pg=pg_conninfo)
    assert result["fsync"] is True
    assert (result["events_per_writer"], result["flush_every"]) == (45, 10)
    runs = result["results"]
    assert [(r["backend"], r["writers"]) for r in runs] == [
        ("jsonl", 1),
        ("jsonl", 3),
        ("postgres", 1),
        ("postgres", 3),
    ]
    for run in runs:
        flushes = 5  # after 10, 20, 30 and 40 events, and the last 5
        assert run["flushes"] == run["writers"] * flushes
        assert run["events"] == run["writers"] * (45 + flushes)  # a log/digest per flush
        assert run["lost"] == 0
        assert run["appends_per_s"] > 0
        assert run["seconds"] > 0
        assert 0 < run["flush_p50_ms"] <= run["flush_p99_ms"]
    # the bench's schema is dropped afterwards: nothing left behind on the server
    with psycopg.connect(pg_conninfo, autocommit=True) as conn:
        query = sql.SQL("SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'bench_%'")
        row = conn.execute(query).fetchone()
    assert row == (0,)
