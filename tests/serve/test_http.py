"""``tapelog serve`` over plain HTTP: escaping, methods, ids, bodies, headers, the list.

The app is driven in process (Starlette's test client) over a JSONL store
holding logs written event by event, so each test can put exactly the text it
needs into a log (a tool named like a script element, model text with markup).
"""

from __future__ import annotations

import base64
import hashlib
import re
import time
from collections.abc import Iterator
from html import unescape
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from tapelog.audit import cache_report, encode_request, rebuild_requests
from tapelog.cli._serve_cmd import default_index
from tapelog.serve import create_app
from tapelog.store import JsonlStore, PostgresStore

from ._helpers import TIME, HandLog, write_store

TOOL = "<script>document.body.dataset.pwned='tool'</script>"
TEXT = "<img src=x onerror=\"document.body.dataset.pwned='text'\"></script><!--"


@pytest.fixture
def store(tmp_path: Path) -> Path:
    hostile = HandLog("hostile", tool=TOOL)
    hostile.ask("Say " + TEXT, TEXT, tool_output=TEXT)
    hostile.ask("Again", "fine")
    small = HandLog("small", created=TIME + 1000)
    small.ask("one", "answer one")
    big = HandLog("big", created=TIME + 2000, model="deepseek-reasoner")
    for i in range(3):
        big.ask(f"q{i}", f"a{i}")
    write_store(tmp_path / "store", hostile, small, big)
    return tmp_path / "store"


@pytest.fixture
def client(store: Path) -> Iterator[TestClient]:
    with TestClient(create_app(JsonlStore(store)), base_url="http://127.0.0.1") as client:
        yield client


PAGES = ["/", "/s/hostile", "/s/hostile/diff?a=1&b=3", "/s/hostile?req=1"]


@pytest.mark.parametrize("path", PAGES)
def test_log_text_is_escaped_on_every_page(client: TestClient, path: str) -> None:
    html = client.get(path).text
    assert "<script>document" not in html
    assert "<img src=x" not in html
    assert "</script><!--" not in html
    if path != "/":
        assert "&lt;img src=x onerror=" in html
    if path.startswith("/s/hostile?"):
        assert "&lt;script&gt;document.body.dataset.pwned=&#x27;tool&#x27;&lt;/script&gt;" in html


@pytest.mark.parametrize("path", [p.split("?")[0] for p in PAGES] + ["/s/small/requests/1.json"])
@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
def test_nothing_but_get_is_answered(client: TestClient, path: str, method: str) -> None:
    response = client.request(method, path)
    assert response.status_code == 405
    assert set(response.headers["allow"].split(", ")) == {"GET", "HEAD"}


@pytest.mark.parametrize(
    "path",
    [
        "/s/nope",
        "/s/.locks",
        "/s/..%2F..%2Fetc%2Fpasswd",
        "/s/a%20b",
        "/s/%2E%2E",
        "/s/nope/diff?a=1&b=2",
        "/s/..%2Fsmall/requests/1.json",
        "/s/nope/events",
        "/s/%3Cscript%3Ex%3C%2Fscript%3E",
    ],
)
def test_a_bad_or_unknown_id_is_404(client: TestClient, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 404
    assert "<script>x" not in response.text


def test_an_unknown_request_is_404_with_a_sentence(client: TestClient) -> None:
    for path in ("/s/small/requests/0.json", "/s/small/requests/3.json"):
        response = client.get(path)
        assert response.status_code == 404
        assert "session small has 2 loop request(s)" in response.text
    diff = client.get("/s/small/diff?a=1&b=9")
    assert diff.status_code == 404
    assert "request 9 does not exist: the session has 2 loop request(s)" in diff.text
    assert client.get("/s/small/diff?a=x&b=2").status_code == 400


def test_a_request_body_download_is_the_rebuilt_bytes(client: TestClient, store: Path) -> None:
    session = JsonlStore(store).load("big").session
    rebuilt = rebuild_requests(session.events, session_id="big")
    assert len(rebuilt) == 6
    for item in rebuilt:
        response = client.get(f"/s/big/requests/{item.index}.json")
        assert response.status_code == 200
        assert response.content == encode_request(item.request)
        assert response.headers["content-type"] == "application/json"
        assert response.headers["content-disposition"] == (
            f'attachment; filename="big-request-{item.index}.json"'
        )


def _hashes(csp: str, directive: str) -> set[str]:
    part = next(p.strip() for p in csp.split(";") if p.strip().startswith(directive + " "))
    return set(re.findall(r"'sha256-([^']+)'", part))


def _sha(text: str) -> str:
    return base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


@pytest.mark.parametrize("path", PAGES)
def test_the_csp_allows_exactly_the_pages_own_inline_code(client: TestClient, path: str) -> None:
    response = client.get(path)
    csp = response.headers["content-security-policy"]
    assert "'unsafe-inline'" not in csp
    assert "default-src 'none'" in csp
    assert "connect-src 'self'" in csp
    html = response.text
    scripts = re.findall(r"<script>(.*?)</script>", html, flags=re.S)
    styles = re.findall(r"<style>(.*?)</style>", html, flags=re.S)
    assert styles
    assert {_sha(s) for s in scripts} <= _hashes(csp, "script-src")
    assert {_sha(s) for s in styles} <= _hashes(csp, "style-src")
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["referrer-policy"] == "no-referrer"
    # Nothing from the network: no remote src/href, no stylesheet link, no url().
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:[a-z]+:)?//""", html, flags=re.I)
    assert "<link" not in html
    assert "url(" not in html


def test_a_host_that_is_not_loopback_is_refused(client: TestClient) -> None:
    assert client.get("/", headers={"host": "attacker.example:8766"}).status_code == 421
    assert client.get("/", headers={"host": "127.0.0.1.attacker.example"}).status_code == 421
    for host in ("localhost:8766", "[::1]:8766", "127.0.0.1"):
        assert client.get("/", headers={"host": host}).status_code == 200


def _rows(html: str) -> list[dict[str, str]]:
    rows = []
    for body in re.findall(r'<tr data-id="[^"]*">(.*?)</tr>', html, flags=re.S):
        cells = dict(re.findall(r'<td[^>]*data-col="(\w+)"[^>]*>(.*?)</td>', body, flags=re.S))
        cells["id"] = re.sub(r"<[^>]+>", "", cells["id"])
        rows.append(cells)
    return rows


def test_the_list_shows_the_cache_audits_numbers(client: TestClient, store: Path) -> None:
    rows = {r["id"]: r for r in _rows(client.get("/").text)}
    assert set(rows) == {"hostile", "small", "big"}
    for session_id, row in rows.items():
        totals = cache_report(JsonlStore(store).load(session_id).session).totals
        assert row["requests"] == f"{totals.requests:,}"
        assert row["prompt"] == f"{totals.prompt_tokens:,}"
        assert row["cached"] == f"{totals.cached_reported:,}"
        assert row["hit"] == f"{100 * totals.hit_ratio:.0f}%"
        assert row["efficiency"] == f"{100 * totals.efficiency:.0f}%"
        assert row["lost"] == f"{totals.bottom_line.lost_tokens:,}"
        assert re.sub(r"<[^>]+>", "", row["status"]) == "ended completed"


def test_the_list_says_the_bottom_line_first_and_names_the_worst_session(tmp_path: Path) -> None:
    fine, leaky = HandLog("fine"), HandLog("leaky", created=TIME + 1)
    for log in (fine, leaky):
        for i in range(5):
            log.ask(f"q{i}", f"a{i}", tool_output="x" * 350)
    leaky.evicted = True  # the provider reports nothing cached: an unexplained drop
    leaky.ask("q5", "a5")
    write_store(tmp_path, fine, leaky)
    line = cache_report(leaky.session).totals.bottom_line
    assert line.lost_tokens > 0
    with TestClient(create_app(JsonlStore(tmp_path)), base_url="http://127.0.0.1") as client:
        page = client.get("/").text
        by_lost = [r["id"] for r in _rows(client.get("/?sort=lost&order=desc").text)]
        session_page = client.get("/s/leaky").text
    # the session's page says its own bottom line, as `tapelog report` does
    own = re.search(r'<p class="bottom-line">(.*?)</p>', session_page, flags=re.S)
    assert own is not None
    assert unescape(own.group(1)) == line.sentence
    found = re.search(r'<p class="bottom-line">(.*?)</p>', page, flags=re.S)
    assert found is not None
    text = unescape(re.sub(r"<[^>]+>", "", found.group(1)))
    assert text == (
        f"{line.lost_tokens:,} prompt tokens paid at full price that the cache could have "
        f"served, in 1 session. The most in leaky: {line.sentence}"
    )
    assert page.index('class="bottom-line"') < page.index('<table class="sessions"')
    rows = {r["id"]: r for r in _rows(page)}
    assert rows["leaky"]["lost"] == f"{line.lost_tokens:,}"
    assert rows["fine"]["lost"] == "0"
    assert by_lost == ["leaky", "fine"]


def test_the_list_sorts_and_filters_on_the_server(client: TestClient) -> None:
    def ids(query: str) -> list[str]:
        return [r["id"] for r in _rows(client.get("/" + query).text)]

    assert ids("") == ["big", "small", "hostile"]  # newest first
    assert ids("?sort=requests&order=asc") == ["small", "hostile", "big"]
    assert ids("?sort=requests&order=desc") == ["big", "hostile", "small"]
    assert ids("?sort=id&order=asc") == ["big", "hostile", "small"]
    assert ids("?q=REASONER") == ["big"]
    assert ids("?status=running") == []
    assert ids("?status=ended&sort=created&order=asc") == ["hostile", "small", "big"]
    assert ids("?sort=nonsense&order=sideways&page=-3") == ["big", "small", "hostile"]


def test_the_default_index_file_is_per_store_and_outside_it(tmp_path: Path) -> None:
    a, b = default_index("/srv/a"), default_index("/srv/b")
    assert a != b
    assert a.parent == b.parent
    assert a.parent.parts[-2:] == ("tapelog", "serve")


def test_a_store_that_cannot_be_read_is_one_sentence() -> None:
    store = PostgresStore("host=/nonexistent-socket-dir dbname=x user=y password=sekrit-pass")
    with TestClient(create_app(store), base_url="http://127.0.0.1") as client:
        response = client.get("/")
    assert response.status_code == 503
    # the store's own sentence (the server reads it through the port only)
    assert "could not connect to the store" in response.text
    assert "check the connection string and the server" in response.text
    assert "sekrit-pass" not in response.text


def test_the_sessions_page_audits_every_small_session_it_shows_however_slow_the_machine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page's audit budget is work (events), not wall time: on a loaded
    machine a page of small sessions still shows every efficiency at once."""
    logs = [HandLog(f"small-{k}", created=TIME + k) for k in range(4)]
    for log in logs:
        log.ask("a", "b")
    write_store(tmp_path, *logs)
    import tapelog.serve._index as index_module

    real = index_module.cache_report

    def slow(session: Any) -> Any:
        time.sleep(0.2)  # a machine under load
        return real(session)

    monkeypatch.setattr(index_module, "cache_report", slow)
    with TestClient(create_app(JsonlStore(tmp_path)), base_url="http://127.0.0.1") as client:
        page = client.get("/").text
    assert "cache efficiency audited for" not in page
    for log in logs:
        efficiency = cache_report(log.session).totals.efficiency
        cell = f'data-col="efficiency">{100 * efficiency:.0f}%</td>'
        assert cell in page.split(f'data-id="{log.session.id}"')[1].split("</tr>")[0]


def test_the_first_view_walks_the_log_once(
    client: TestClient, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page needs the walk of the requests and the cache audit: one walk
    serves both (issue 20), and the audit is the same as one made on its own."""
    import tapelog.audit._cache_report as report_module
    import tapelog.serve._live as live_module

    walks: list[str] = []

    def counting(module: Any) -> Any:
        walk = module.walk_requests

        def counted(session: Any) -> Any:
            walks.append(session.id)
            return walk(session)

        return counted

    monkeypatch.setattr(live_module, "walk_requests", counting(live_module))
    monkeypatch.setattr(report_module, "walk_requests", counting(report_module))
    assert client.get("/s/big").status_code == 200
    assert walks == ["big"]
    session = JsonlStore(store).load("big").session
    alone = cache_report(session)
    assert walks == ["big", "big"]  # an audit on its own walks by itself
    shared = cache_report(session, walked=list(live_module.walk_requests(session)))
    assert shared.to_json() == alone.to_json()
    assert alone.totals.requests == 6  # three asks of two steps each
