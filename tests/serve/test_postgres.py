"""``tapelog serve`` over the PostgreSQL store: the same pages, checks and browser.

Same server as tests/store/test_postgres.py (its ``pg_conninfo`` fixture:
``TAPELOG_TEST_PG`` or a throwaway server), a schema of this module's own,
filled by ``tapelog demo --store postgresql://...`` twice and a fork.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from starlette.testclient import TestClient

from store.test_cli_postgres import url_of
from store.test_postgres import drop_schema, pg_conninfo, schema_for
from tapelog.audit import encode_request, rebuild_requests
from tapelog.serve import create_app
from tapelog.serve._index import SessionIndex
from tapelog.store import PostgresStore
from tapelog.store._api import Folded

from ._helpers import HandLog, demo_sessions, served, tapelog
from ._views import check_chart, check_diff, check_list, check_live, check_without_script
from .conftest import Watched

__all__ = ["pg_conninfo"]  # the imported fixture, shared with tests/store


@pytest.fixture(scope="module")
def pg(pg_conninfo: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The store's URL, the store, and its sessions: two demo runs, a fork of the first."""
    schema = schema_for(tmp_path_factory.mktemp("serve-pg"))
    url = url_of(pg_conninfo, schema)
    store = PostgresStore(pg_conninfo, schema=schema)
    try:
        first, second = demo_sessions(url)
        session = store.load(first).session
        end = next(e.seq for e in session.events if e.type == "turn/end")
        tapelog("fork", first, "--at", str(end), "--id", "fork-1", "--store", url)
        yield url, store, [first, second, "fork-1"]
    finally:
        drop_schema(pg_conninfo, schema)


@pytest.fixture(scope="module")
def base(pg: Any) -> Iterator[str]:
    with served(create_app(pg[1])) as url:
        yield url


def test_the_sessions_page_lists_the_demo_sessions_with_their_totals(
    watched: Watched, base: str, pg: Any
) -> None:
    url, _, (first, _, fork) = pg
    check_list(watched, base, url, {fork: first})


def test_the_chart_has_one_bar_per_request_and_each_break_is_labelled(
    watched: Watched, base: str, pg: Any
) -> None:
    url, _, ids = pg
    check_chart(watched, base, url, ids[0])


def test_a_diff_between_two_requests_shows_the_added_tool(
    watched: Watched, base: str, pg: Any
) -> None:
    _, store, ids = pg
    check_diff(watched, base, store, ids[0], 2, 3, "word_count")


def test_a_session_that_gains_events_shows_them_within_2_s(
    watched: Watched, base: str, pg: Any
) -> None:
    log = HandLog("live-pg", tool="lookup")
    log.ask("first question", "first answer")
    check_live(watched, base, pg[1], log)


_TESTS = Path(__file__).resolve().parents[1]


def _follower_activity(store: PostgresStore) -> dict[int, Any]:
    """When each connection that follows a session of ``store`` last ran a query
    (``pg_stat_activity``: a follower's last query reads the rows after a seq)."""
    query = "SELECT pid, state_change FROM pg_stat_activity WHERE query LIKE %s"
    pattern = f'%FROM "{store.schema}".events WHERE session_id = $1 AND seq >= $2%'
    with psycopg.connect(store.conninfo, autocommit=True) as conn:
        return dict(conn.execute(query, (pattern,)).fetchall())


def test_a_writer_in_another_process_is_shown_when_it_notifies_not_by_polling(
    watched: Watched, base: str, pg: Any
) -> None:
    _, store, _ = pg
    page = watched.page
    argv = [sys.executable, "-m", "serve._live_writer", store.conninfo, store.schema, "live-proc"]
    with subprocess.Popen(
        argv, cwd=_TESTS, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as writer:
        assert writer.stdin is not None
        assert writer.stdout is not None
        try:
            assert writer.stdout.readline() == "stored\n"
            page.goto(f"{base}/s/live-proc")
            page.wait_for_selector("body[data-live='open']", timeout=5000)
            assert page.locator("[data-total='requests']").inner_text() == "2"
            # held by its writer between turns: idle
            page.wait_for_selector("[data-status].status-idle", timeout=3000)
            # Quiet: the page is open, and its follower queries nothing.
            before = _follower_activity(store)
            assert before  # the page's follower read once, after LISTEN
            time.sleep(2.0)
            assert _follower_activity(store) == before
            flushed = time.monotonic()
            writer.stdin.write("go\n")
            writer.stdin.flush()
            answer, turn = (int(n) for n in writer.stdout.readline().split())
            page.wait_for_selector(f"#seq-{answer}", timeout=2000)
            assert time.monotonic() - flushed < 2.0
            assert page.locator(f"#seq-{turn} .reason").inner_text() == "completed"
            assert page.locator("[data-total='requests']").inner_text() == "4"
            after = _follower_activity(store)
            assert any(after[pid] != when for pid, when in before.items() if pid in after)
        finally:
            writer.stdin.write("done\n")
            writer.stdin.flush()
        assert writer.wait(timeout=30) == 0
    page.wait_for_selector("[data-status].status-ended", timeout=3000)
    assert watched.errors == []


def test_everything_but_live_updates_works_without_javascript(
    no_script: Watched, base: str, pg: Any
) -> None:
    check_without_script(no_script, base, pg[2][1], 2, 3, "word_count")


def test_request_bodies_are_the_rebuilt_bytes(pg: Any) -> None:
    _, store, ids = pg
    rebuilt = rebuild_requests(store.load(ids[1]).session)
    with TestClient(create_app(store), base_url="http://127.0.0.1") as client:
        for item in rebuilt:
            response = client.get(f"/s/{ids[1]}/requests/{item.index}.json")
            assert response.content == encode_request(item.request)
        assert client.get("/s/nope").status_code == 404
        assert client.post(f"/s/{ids[1]}").status_code == 405


def test_the_index_folds_only_new_rows_and_sees_the_write_lock(
    pg: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _, store, _ = pg
    log = HandLog("grows-pg", created=1)
    log.ask("a", "b")
    with store.create(log.session) as writer:
        writer.checkpoint()
    folded: list[int] = []
    original = Folded.extend

    def spy(self: Folded[Any], lines: Any, *, counted: bool = True) -> None:
        lines = list(lines)
        folded.append(len(lines))
        original(self, lines, counted=counted)

    monkeypatch.setattr(Folded, "extend", spy)
    index = SessionIndex(store, tmp_path / "index")
    rows = {r.id: r for r in index.rows()}
    assert rows["grows-pg"].status == "ended"
    session, writer = store.open("grows-pg")
    try:
        log.session = session
        added = log.ask("c", "d")
        writer.flush()
        folded.clear()
        row = {r.id: r for r in index.rows()}["grows-pg"]
        assert row.status == "idle"  # held between turns
        # Only the new rows of the types the list folds came from the server.
        kinds = ("turn/", "step/", "assistant/message")
        assert folded == [sum(1 for e in added if e.type.startswith(kinds))]  # 8 of 12 rows
        assert row.summary.requests == 4
        assert row.summary.events == len(session)
        assert "grows-pg" in index.pending()  # idle: audited although held
    finally:
        writer.close()
    row = {r.id: r for r in index.rows()}["grows-pg"]
    assert row.status == "ended"
    fresh = {r.id: r for r in SessionIndex(store).rows()}["grows-pg"]
    assert row.summary == fresh.summary
