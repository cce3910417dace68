"""``tapelog worker`` refuses what cannot work in one line, before it connects; a
turn queue with no worker yet says to start one."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from store.test_postgres import pg_conninfo
from tapelog import StoreError
from tapelog.cli import cli
from tapelog.dbos import TurnQueue
from tapelog.store import PostgresStore

__all__ = ["pg_conninfo"]  # the imported fixture


def _worker(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["worker", *args], obj={"debug": False})
    return result.exit_code, result.output


def test_a_directory_store_is_refused_workers_need_the_database(tmp_path: Path) -> None:
    code, output = _worker("--store", str(tmp_path))
    assert code == 2
    assert "workers share a PostgreSQL store" in output
    assert "Traceback" not in output


def test_an_unknown_provider_is_refused_before_connecting() -> None:
    # No server listens at this address: the provider is refused first.
    code, output = _worker("--store", "postgresql://nobody@127.0.0.1:9/x", "--provider", "nope")
    assert code == 2
    assert "'nope' is not a known provider" in output
    assert "Traceback" not in output


def test_enqueueing_before_any_worker_created_the_queue_says_to_start_one(
    pg_conninfo: str,
) -> None:
    store = PostgresStore(pg_conninfo, schema="t_no_workers")
    with (
        TurnQueue(store, system_schema="dbos_never_created") as queue,
        pytest.raises(StoreError, match=r"start a `tapelog worker` on it first"),
    ):
        queue.enqueue("s1", "hello")
