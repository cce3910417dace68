"""Two ``tapelog run --session NEW`` at once: the second is told who is writing.

Between deciding that a session is new and creating it, ``run`` sets up its
provider and starts its MCP servers, which can take seconds. The write lock is
taken before that set-up (``SessionStore.reserve``), so a second process on
the same new id is refused at once as "open for writing by another process
(pid N)", the documented message, on both stores, not told later that the
session "already exists ... choose another id".

The gap is made real and deterministic with an MCP server that notes its start
and then sleeps: the second process starts once the first is inside its set-up.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tapelog.store import JsonlStore, PostgresStore
from tapelog.store._api import verify_jsonl

from .test_cli_postgres import url_of
from .test_postgres import drop_schema, pg_conninfo, schema_for

__all__ = ["pg_conninfo"]  # the imported fixture, shared with test_postgres.py

TAPELOG = str(Path(sys.executable).with_name("tapelog"))
TIME_SERVER = str(Path(sys.executable).with_name("mcp-server-time"))


def _slow_mcp(started: Path) -> str:
    """An ``--mcp`` value whose server notes that it started, then sleeps before serving."""
    script = f"echo started >> {shlex.quote(str(started))}; sleep 3; exec {TIME_SERVER}"
    return "slow=" + shlex.join(["sh", "-c", script])


def _run(store: str, started: Path) -> subprocess.Popen[str]:
    args = ["run", "hello", "--session", "new", "--tools", "none", "--provider", "emulator"]
    return subprocess.Popen(
        [TAPELOG, *args, "--store", store, "--mcp", _slow_mcp(started)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TAPELOG_CHECK": "1"},
    )


def _race(store: str, tmp_path: Path) -> tuple[subprocess.Popen[str], str, str, int]:
    """Start one run, then a second once the first is inside its set-up; the
    first process, the second's stderr, the first's stderr and the second's code."""
    started = tmp_path / "started"
    first = _run(store, started)
    deadline = time.monotonic() + 60
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert started.exists(), first.communicate()
    second = _run(store, started)
    _, err2 = second.communicate(timeout=60)
    _, err1 = first.communicate(timeout=60)
    return first, err2, err1, second.returncode


def _check(first: subprocess.Popen[str], err2: str, err1: str, code2: int) -> None:
    assert first.returncode == 0, err1
    assert code2 == 2, err2
    (line,) = [x for x in err2.splitlines() if x.startswith("error: ")]
    assert f"session new is open for writing by another process (pid {first.pid}" in line
    assert "already exists" not in line


def test_two_runs_creating_one_new_jsonl_session_the_second_names_the_first(
    tmp_path: Path,
) -> None:
    root = tmp_path / "store"
    first, err2, err1, code2 = _race(str(root), tmp_path)
    _check(first, err2, err1, code2)
    assert (tmp_path / "started").read_text().count("started") == 1  # refused before set-up
    store = JsonlStore(root)
    assert verify_jsonl(store.path("new").read_bytes(), expected_id="new").ok


@pytest.fixture
def pg_url(pg_conninfo: str, tmp_path: Path) -> Iterator[tuple[str, PostgresStore]]:
    schema = schema_for(tmp_path)
    yield url_of(pg_conninfo, schema), PostgresStore(pg_conninfo, schema=schema)
    drop_schema(pg_conninfo, schema)


def test_two_runs_creating_one_new_postgres_session_the_second_names_the_first(
    tmp_path: Path, pg_url: tuple[str, PostgresStore]
) -> None:
    url, store = pg_url
    first, err2, err1, code2 = _race(url, tmp_path)
    _check(first, err2, err1, code2)
    assert (tmp_path / "started").read_text().count("started") == 1
    assert verify_jsonl(store.session_bytes("new"), expected_id="new").ok
