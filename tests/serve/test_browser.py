"""``tapelog serve`` in headless Chromium over a JSONL store of demo sessions and a fork.

The store holds two runs of ``tapelog demo`` (each registers the
``word_count`` tool between requests 2 and 3, a cache break) and a fork of
the first; the server is the real app on a loopback port. The same checks run
against the PostgreSQL store in test_postgres.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tapelog.serve import create_app
from tapelog.store import JsonlStore

from ._helpers import HandLog, demo_sessions, served, tapelog
from ._views import check_chart, check_diff, check_list, check_live, check_without_script
from .conftest import Watched


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[str]]:
    """The store's directory, and its sessions: two demo runs, then a fork of the first."""
    root = str(tmp_path_factory.mktemp("serve") / "store")
    first, second = demo_sessions(root)
    session = JsonlStore(root).load(first).session
    end = next(e.seq for e in session.events if e.type == "turn/end")
    tapelog("fork", first, "--at", str(end), "--id", "fork-1", "--store", root)
    return root, [first, second, "fork-1"]


@pytest.fixture(scope="module")
def base(store: tuple[str, list[str]]) -> Iterator[str]:
    with served(create_app(JsonlStore(store[0]))) as url:
        yield url


def test_the_sessions_page_lists_the_demo_sessions_with_their_totals(
    watched: Watched, base: str, store: tuple[str, list[str]]
) -> None:
    root, (first, _, fork) = store
    check_list(watched, base, root, {fork: first})


def test_the_chart_has_one_bar_per_request_and_each_break_is_labelled(
    watched: Watched, base: str, store: tuple[str, list[str]]
) -> None:
    root, ids = store
    for session_id in ids[:2]:
        check_chart(watched, base, root, session_id)


def test_a_diff_between_two_requests_shows_the_added_tool(
    watched: Watched, base: str, store: tuple[str, list[str]]
) -> None:
    root, ids = store
    check_diff(watched, base, JsonlStore(root), ids[1], 2, 3, "word_count")


def test_a_fork_shows_its_family(watched: Watched, base: str, store: tuple[str, list[str]]) -> None:
    _, (first, _, fork) = store
    page = watched.page
    page.goto(f"{base}/s/{fork}")
    assert page.locator(".forks .here").inner_text() == f"{fork} (this session)"
    page.click(f".forks a:has-text('{first}')")
    assert page.url.endswith(f"/s/{first}")
    assert page.locator(".forks .here").inner_text() == f"{first} (this session)"
    assert page.locator(f".forks a:has-text('{fork}')").count() == 1
    assert watched.errors == []


def test_a_session_that_gains_events_shows_them_within_2_s(
    watched: Watched, base: str, store: tuple[str, list[str]]
) -> None:
    log = HandLog("live-jsonl", tool="lookup")
    log.ask("first question", "first answer")
    check_live(watched, base, JsonlStore(store[0]), log)


def test_everything_but_live_updates_works_without_javascript(
    no_script: Watched, base: str, store: tuple[str, list[str]]
) -> None:
    check_without_script(no_script, base, store[1][1], 2, 3, "word_count")


def test_a_long_session_is_shown_a_window_at_a_time(watched: Watched, tmp_path: Path) -> None:
    log = HandLog("long")
    for i in range(30):  # 60 requests: windows of 1-50 and 51-60
        log.ask(f"question {i}", f"answer {i}")
    store = JsonlStore(tmp_path)
    with store.create(log.session) as writer:
        writer.checkpoint()
    page = watched.page
    with served(create_app(store)) as url:
        page.goto(f"{url}/s/long")
        assert page.locator(".window b").first.inner_text() == "requests 51–60 of 60"
        assert page.locator("svg.chart g.bar").count() == 10  # the chart is the window's
        assert page.locator("details.request").count() == 10
        assert page.locator('[data-total="requests"]').inner_text() == "60"  # totals: all
        page.locator(".window a:has-text('first')").first.click()
        page.wait_for_url("**/s/long?req=1")
        assert page.locator("svg.chart g.bar").count() == 50
        page.locator("svg.chart g.bar[data-index='7'] > a").click()
        assert page.locator("details.request").count() == 50
        assert page.locator("#req-7").count() == 1
        assert page.locator("#req-51").count() == 0
        page.click(".window a:has-text('last »')")
        assert page.locator("#req-60").count() == 1
    assert watched.errors == []
