"""Cache drops the log can explain are named: a new process, an idle gap; ``unexplained``
is left for what the log cannot explain."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from agent._harness import LONG_SYSTEM, agent_on
from tapelog.audit import cache_report, render_report
from tapelog.cache._api import provider_cache
from tapelog.emulator import Emulator
from tapelog.log import decode
from tapelog.log._api import Session

TAPELOG = str(Path(sys.executable).with_name("tapelog"))


def _without_style(page: str) -> str:
    """The page without its stylesheet (which names every cause's colour)."""
    return re.sub(r"<style>.*?</style>", "", page, flags=re.S)


def _tapelog(*args: str, store: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TAPELOG_STORE": str(store)}
    return subprocess.run(
        [TAPELOG, *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def test_resuming_in_a_new_process_on_the_in_process_emulator_is_a_named_cause(
    tmp_path: Path,
) -> None:
    store = tmp_path / "store"
    common = ["--session", "s1", "--provider", "emulator", "--tools", "none"]
    common += ["--system", LONG_SYSTEM]
    for prompt in ("hello there", "and again"):
        done = _tapelog("run", prompt, *common, store=store)
        assert done.returncode == 0, done.stderr
    report = decode(_tapelog("cache", "s1", "--json", store=store).stdout)
    kinds = [[c["kind"] for c in r["causes"]] for r in report["requests"]]
    assert kinds == [[], ["new-process"]]
    second = report["requests"][1]
    assert second["drop"] is True
    assert second["cached_reported"] == 0 == second["cached_expected"]
    assert report["totals"]["efficiency"] == 1.0
    table = _tapelog("cache", "s1", store=store).stdout
    assert "unexplained" not in table
    assert "new process" in table
    html = tmp_path / "r.html"
    assert _tapelog("report", "s1", "-o", str(html), store=store).returncode == 0
    page = _without_style(html.read_text(encoding="utf-8"))
    assert "unexplained" not in page
    assert "a new process" in page


async def test_an_idle_gap_past_the_cache_lifetime_is_a_named_cause() -> None:
    now = [1_000_000.0]  # seconds, shared by the provider's TTL and the log's clock
    emulator = Emulator(ttl_seconds=300, clock=lambda: now[0])
    session = Session(clock=lambda: int(now[0] * 1000))
    async with agent_on(emulator, provider="openai", session=session, system=LONG_SYSTEM) as agent:
        await agent.run("first question")
        now[0] += 60
        await agent.run("a minute later")
        now[0] += 20 * 60
        await agent.run("twenty minutes later")
    report = cache_report(agent.session)
    rows = report.requests
    assert rows[1].cached_reported > 0
    assert not rows[1].drop
    assert [c.kind for c in rows[2].causes] == ["idle-gap"]
    detail = rows[2].causes[0].detail
    assert detail["lifetime_ms"] == provider_cache("openai").idle_lifetime_ms
    assert detail["gap_ms"] >= 20 * 60 * 1000
    assert rows[2].causes[0].label.startswith("idle 20m")
    assert report.totals.efficiency == 1.0
    assert "unexplained" not in _without_style(render_report(agent.session))


async def test_a_drop_with_no_logged_reason_stays_unexplained() -> None:
    """An emulator that forgets (a short TTL) while the log shows no gap: nothing explains it."""
    now = [1_000_000.0]
    emulator = Emulator(ttl_seconds=300, clock=lambda: now[0])
    session = Session(clock=lambda: 1_000_000_000)  # the log says no time passed
    async with agent_on(emulator, provider="openai", session=session, system=LONG_SYSTEM) as agent:
        await agent.run("first question")
        now[0] += 20 * 60
        await agent.run("second")
    rows = cache_report(agent.session).requests
    assert [c.kind for c in rows[1].causes] == ["unexplained"]
