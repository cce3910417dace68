"""The browser checks of ``tapelog serve``'s pages, run against each store backend.

Each check drives headless Chromium through Playwright and compares what the
page shows with what the command line says of the same store (``tapelog
sessions --json``, ``tapelog cache --json``, ``tapelog requests``), so the
pages are held to the numbers every other reader of the log computes.
"""

from __future__ import annotations

import time
from typing import Any

from tapelog.audit import encode_request, rebuild_requests
from tapelog.store import SessionStore

from ._helpers import HandLog, tapelog_json
from .conftest import Watched

__all__ = [
    "check_chart",
    "check_diff",
    "check_list",
    "check_live",
    "check_without_script",
]


def _pct(value: float) -> str:
    return f"{100 * value:.0f}%"


def _cell(w: Watched, session_id: str, column: str) -> str:
    return w.page.locator(f'tr[data-id="{session_id}"] td[data-col="{column}"]').inner_text()


def check_list(w: Watched, base: str, store: str, parents: dict[str, str]) -> list[dict[str, Any]]:
    """The sessions page lists every stored session with the CLI's numbers; the rows.
    At 1366 px and 1000 px wide every column fits (none is cut off or scrolled to)."""
    for width in (1366, 1000):
        w.page.set_viewport_size({"width": width, "height": 800})
        w.page.goto(base + "/")
        fits = w.page.evaluate(
            """() => {
                const table = document.querySelector("table.sessions");
                const main = document.querySelector("main");
                const style = getComputedStyle(main);
                const inner = main.clientWidth - parseFloat(style.paddingLeft)
                    - parseFloat(style.paddingRight);
                const right = Math.max(...[...table.querySelectorAll("th")].map(
                    (th) => th.getBoundingClientRect().right));
                return {table: table.getBoundingClientRect().width, inner: inner,
                        right: right, page: document.documentElement.scrollWidth};
            }"""
        )
        assert fits["table"] <= fits["inner"] + 0.5, (width, fits)
        assert fits["right"] <= width, (width, fits)
        assert fits["page"] <= width, (width, fits)
    w.page.set_viewport_size({"width": 1280, "height": 800})
    w.page.goto(base + "/")
    listed = tapelog_json("sessions", "--store", store)
    assert w.page.locator("table.sessions tbody tr").count() == len(listed)
    for row in listed:
        sid = row["id"]
        totals = tapelog_json("cache", sid, "--store", store)["totals"]
        assert _cell(w, sid, "id") == sid
        created = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(row["created"] / 1000))
        assert _cell(w, sid, "created") == created
        assert _cell(w, sid, "requests") == f"{totals['requests']:,}"
        assert _cell(w, sid, "prompt") == f"{totals['prompt_tokens']:,}"
        assert _cell(w, sid, "cached") == f"{totals['cached_reported']:,}"
        assert _cell(w, sid, "hit") == _pct(totals["hit_ratio"])
        assert _cell(w, sid, "efficiency") == _pct(totals["efficiency"])
        assert _cell(w, sid, "status").split()[0] == "ended"
        assert _cell(w, sid, "parent") == parents.get(sid, "")
    assert w.errors == []
    return listed


def check_chart(w: Watched, base: str, store: str, session_id: str) -> None:
    """One bar per loop request; each break's bar names its causes, as the audit does."""
    w.page.goto(f"{base}/s/{session_id}")
    report = tapelog_json("cache", session_id, "--store", store)
    bars = w.page.locator("svg.chart g.bar")
    assert bars.count() == len(report["requests"]) > 0
    assert [bars.nth(i).get_attribute("data-index") for i in range(bars.count())] == [
        str(r["index"]) for r in report["requests"]
    ]
    breaks = [r for r in report["requests"] if r["causes"]]
    assert breaks, "the session should have a cache break to label"
    assert w.page.locator("svg.chart g.bar.break").count() == len(breaks)
    for row in breaks:
        bar = w.page.locator(f'svg.chart g.bar.break[data-index="{row["index"]}"]')
        label = (bar.locator(".cause-label").text_content() or "").rstrip("…")
        marker = bar.locator("path.marker").get_attribute("class")
        assert marker == f"marker cause-{row['causes'][0]['kind']}"
        # The label names the causes the request's section lists (the audit's own labels).
        causes = w.page.locator(f"#req-{row['index']} > summary .cause")
        assert causes.count() == len(row["causes"])
        named = " · ".join(causes.nth(i).inner_text() for i in range(causes.count()))
        assert label
        assert named.startswith(label)
    assert w.page.get_attribute("body", "data-ok") == "1"  # the report's script ran
    assert w.errors == []


def check_diff(
    w: Watched, base: str, store: SessionStore, session_id: str, a: int, b: int, tool: str
) -> None:
    """The diff form leads to a page naming the tool added between A and B, with bodies."""
    page = w.page
    page.goto(f"{base}/s/{session_id}")
    page.fill('nav.top input[name="a"]', str(a))
    page.fill('nav.top input[name="b"]', str(b))
    page.click('nav.top button:has-text("diff")')
    page.wait_for_url(f"**/s/{session_id}/diff?a={a}&b={b}")
    assert page.locator("li.added", has_text=f"+ {tool} added").count() == 1
    assert page.locator("table.diff.tools td.add", has_text=tool).count() == 1
    explained = page.locator("h2:has-text('Header') + p a")
    assert explained.count() >= 1  # the header delta's seq, linked to the timeline
    rebuilt = rebuild_requests(store.load(session_id).session)
    with page.expect_download() as download:
        page.locator(f'a[href="/s/{session_id}/requests/{b}.json"]').first.click()
    path = download.value.path()
    with open(path, "rb") as f:
        assert f.read() == encode_request(rebuilt[b - 1].request)
    assert w.errors == []


def check_live(w: Watched, base: str, store: SessionStore, log: HandLog) -> None:
    """A session's page shows what a writer flushes within 2 s, totals and status too."""
    page = w.page
    session_id = log.session.id
    with store.create(log.session) as writer:
        writer.checkpoint()
    page.goto(f"{base}/s/{session_id}")
    page.wait_for_selector("body[data-live='open']", timeout=5000)
    assert page.locator("[data-total='requests']").inner_text() == "2"
    session, writer = store.open(session_id)
    try:
        log.session = session
        events = log.ask("What is new?", "Something <b>new</b>")
        answer = next(e for e in reversed(events) if e.type == "assistant/message")
        turn = events[0]
        flushed = time.monotonic()
        writer.flush()
        page.wait_for_selector(f"#seq-{answer.seq}", timeout=2000)
        assert time.monotonic() - flushed < 2.0
        assert page.locator(f"#seq-{answer.seq}").inner_text().endswith("Something <b>new</b>")
        assert page.locator(f"#seq-{answer.seq} b").count() == 0  # shown as text
        assert page.locator(f"#seq-{turn.seq} .reason").inner_text() == "completed"
        assert page.locator("[data-total='requests']").inner_text() == "4"
        assert page.locator("[data-total='prompt_tokens']").inner_text() == "1,000"
        assert page.locator("[data-total='cached_reported']").inner_text() == "600"
        assert page.locator("[data-total='hit_ratio']").inner_text() == "60%"
        # the turn ended and the writer still holds the session: idle, not running
        page.wait_for_selector("[data-status].status-idle", timeout=3000)
        card = page.locator(".card:has([data-total='efficiency']) .name")
        assert card.text_content() == "cache efficiency (at page load)"
    finally:
        writer.close()
    page.wait_for_selector("[data-status].status-ended", timeout=3000)
    assert w.errors == []


def check_without_script(w: Watched, base: str, session_id: str, a: int, b: int, tool: str) -> None:
    """With JavaScript off: sort, filter, open a session, follow a bar, compare two requests."""
    page = w.page
    page.goto(base + "/")
    page.click("table.sessions th a:has-text('requests')")
    assert "sort=requests" in page.url
    page.fill("input[name='q']", session_id)
    page.click("form.filters button")
    assert page.locator("table.sessions tbody tr").count() == 1
    page.click(f"tr[data-id='{session_id}'] td[data-col='id'] a")
    assert page.url.endswith(f"/s/{session_id}")
    assert page.get_attribute("body", "data-ok") is None  # no script ran
    assert page.locator("svg.chart g.bar").count() >= b
    page.locator(f"svg.chart g.bar[data-index='{b}'] > a").click()
    assert page.url.endswith(f"#req-{b}")
    page.fill("nav.top input[name='a']", str(a))
    page.fill("nav.top input[name='b']", str(b))
    page.click("nav.top button:has-text('diff')")
    assert page.locator("li.added", has_text=f"+ {tool} added").count() == 1
    assert w.errors == []
