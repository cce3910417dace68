"""A web page on another origin cannot use the proxy, in headless Chromium.

The page is served on ``http://localhost:PORT``, the proxy on
``http://127.0.0.1:OTHER``, the emulator behind it. The page tries what needs
no preflight (a ``no-cors`` fetch of ``text/plain`` JSON, a body without a
type, a beacon) and what does (a JSON fetch): nothing is logged and the
upstream receives nothing. With ``--allow-origin`` naming the page, its JSON
fetch goes through and the page can read the answer.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, sync_playwright
from starlette.applications import Starlette
from starlette.responses import HTMLResponse
from starlette.routing import Route

from audit.test_report import CHROMIUM
from tapelog.emulator import Emulator

from ._helpers import proxy_on, serve, upstream_for

ATTACK = """<!doctype html><title>a page elsewhere</title><script>
window.results = {};
async function attempt(name, run) {
  try { window.results[name] = String(await run()); }
  catch (e) { window.results[name] = "blocked: " + e.name; }
}
async function attack(url, body) {
  await attempt("text/plain", async () =>
    (await fetch(url, {method: "POST", mode: "no-cors",
                       headers: {"content-type": "text/plain"}, body})).type);
  await attempt("no type", async () =>
    (await fetch(url, {method: "POST", mode: "no-cors", body: new Blob([body])})).type);
  await attempt("beacon", async () => navigator.sendBeacon(url, body));
  await attempt("json", async () => {
    const r = await fetch(url, {method: "POST",
                                headers: {"content-type": "application/json"}, body});
    return r.status + " " + (await r.text()).includes("chat.completion");
  });
  return window.results;
}
</script>"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if CHROMIUM is None:
        pytest.fail("chromium is not installed (Debian: apt-get install chromium)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()


def _page_app() -> Starlette:
    async def page(request: Any) -> HTMLResponse:
        return HTMLResponse(ATTACK)

    return Starlette(routes=[Route("/", page)])


def _attack(browser: Browser, page_port: int, proxy_port: int) -> dict[str, str]:
    url = f"http://127.0.0.1:{proxy_port}/s/victim/v1/chat/completions"
    body = '{"model": "deepseek-chat", "messages": [{"role": "user", "content": "pwned"}]}'
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(f"http://localhost:{page_port}/")
        results: dict[str, str] = page.evaluate("([u, b]) => attack(u, b)", [url, body])
        page.wait_for_timeout(300)  # a beacon is sent after the call returns
        return results
    finally:
        context.close()


def test_a_page_on_another_origin_cannot_write_a_turn(tmp_path: Path, browser: Browser) -> None:
    upstream = Emulator(script=[{"text": "answered"}] * 4)
    lines: list[str] = []
    with (
        serve(upstream.app) as emu_port,
        proxy_on(tmp_path, upstream_for("deepseek", emu_port), lines) as proxy_port,
        serve(_page_app()) as page_port,
    ):
        results = _attack(browser, page_port, proxy_port)
    assert results["json"].startswith("blocked"), results  # the preflight got no yes
    assert list(tmp_path.glob("*.jsonl")) == [], "nothing is logged"
    assert upstream.received == [], "the upstream received nothing"
    assert lines, "the no-preflight requests did arrive"
    assert all("HTTP 403" in line for line in lines), lines


def test_a_page_of_an_allowed_origin_can_use_the_proxy(tmp_path: Path, browser: Browser) -> None:
    upstream = Emulator(script=[{"text": "answered"}] * 4)
    with (
        serve(upstream.app) as emu_port,
        serve(_page_app()) as page_port,
        proxy_on(
            tmp_path,
            upstream_for("deepseek", emu_port),
            allowed_origins=[f"http://localhost:{page_port}"],
        ) as proxy_port,
    ):
        results = _attack(browser, page_port, proxy_port)
    assert results["json"] == "200 true", results
    assert len(upstream.received) == 1, "only the JSON request: the others are not JSON"
    assert [p.stem for p in tmp_path.glob("*.jsonl")] == ["victim"]
