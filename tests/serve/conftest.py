"""Playwright's Chromium for the serve tests: the system's headless Chromium.

Browser downloads are not reachable, so Playwright is pointed at the executable
the report tests use (Debian's ``chromium``, which CI installs); without it the
tests fail, saying so, rather than skip.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, sync_playwright

from audit.test_report import CHROMIUM


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Chromium for one test module. Not longer: Playwright's sync API keeps an
    event loop running on the test thread while it is open, and tests of other
    modules call ``asyncio.run`` there."""
    if CHROMIUM is None:
        pytest.fail(
            "chromium is not installed; the serve tests need it "
            "(Debian: apt-get install chromium, as .ci/run does)"
        )
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()


class Watched:
    """A page whose console errors and uncaught exceptions are collected."""

    def __init__(self, context: BrowserContext) -> None:
        self.page: Page = context.new_page()
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(f"uncaught: {e}"))


@pytest.fixture
def watched(browser: Browser) -> Iterator[Watched]:
    context = browser.new_context(accept_downloads=True)
    try:
        yield Watched(context)
    finally:
        context.close()


@pytest.fixture
def no_script(browser: Browser) -> Iterator[Watched]:
    context = browser.new_context(java_script_enabled=False, accept_downloads=True)
    try:
        yield Watched(context)
    finally:
        context.close()
