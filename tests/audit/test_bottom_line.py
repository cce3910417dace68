"""The cache audit's bottom line (issue 21): tokens a break cost, by cause, in one
sentence; cached reads from another session named, never an efficiency > 100%."""

from __future__ import annotations

import pytest

from agent._harness import LONG_SYSTEM, agent_on
from tapelog.audit import cache_report
from tapelog.emulator import Emulator
from tapelog.log._api import Session

PROVIDERS = ["deepseek", "openai", "anthropic"]


def _stamped(time: str) -> str:
    return f"Current time: {time}\n{LONG_SYSTEM}"


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_timestamp_in_the_system_prompt_is_the_bottom_line(provider: str) -> None:
    emulator = Emulator(script=[{"text": "a"}, {"text": "b"}, {"text": "c"}])
    session = Session()
    async with agent_on(
        emulator, provider=provider, session=session, system=_stamped("2026-12-02 03:00:00")
    ) as agent:
        await agent.run("one")
        await agent.run("two")
        agent.system = _stamped("2026-12-02 03:05:00")
        await agent.run("three")
    report = cache_report(session)
    first, second, third = report.requests
    assert (first.lost_tokens, second.lost_tokens) == (0, 0)
    assert third.drop
    assert third.cached_reported < second.cached_reported
    # Sent again, the second prompt would have read what it had cached and wrote.
    assert third.lost_tokens > 0
    assert third.lost_tokens <= third.prompt_tokens - third.cached_reported
    line = report.totals.bottom_line
    assert (line.lost_tokens, line.breaks) == (third.lost_tokens, 1)
    assert line.sentence == (
        f"{third.lost_tokens:,} prompt tokens paid at full price that the cache could have "
        "served, in 1 break: all from a timestamp in the system prompt."
    )
    totals = report.to_json()["totals"]
    assert totals["lost_by_cause"] == [
        {"cause": "a timestamp in the system prompt", "tokens": third.lost_tokens, "breaks": 1}
    ]
    assert totals["bottom_line"] == line.sentence


async def test_without_breaks_the_bottom_line_says_nothing_was_lost() -> None:
    emulator = Emulator(script=[{"text": "a"}, {"text": "b"}])
    session = Session()
    async with agent_on(emulator, session=session, system=LONG_SYSTEM) as agent:
        await agent.run("one")
        await agent.run("two")
    line = cache_report(session).totals.bottom_line
    assert line.sentence == "No prompt tokens paid at full price that the cache could have served."


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_prefix_another_session_cached_is_named_not_above_100(provider: str) -> None:
    emulator = Emulator(script=[{"text": "a"}, {"text": "b"}])
    sessions = [Session(), Session()]
    for session in sessions:
        async with agent_on(
            emulator, provider=provider, session=session, system=LONG_SYSTEM
        ) as agent:
            await agent.run("the same question")
    first, second = (cache_report(s) for s in sessions)
    assert first.totals.cached_reported == 0
    row = second.requests[0]
    assert row.cached_reported > row.cached_expected  # the first session's prefix
    assert row.cross_session_tokens == row.cached_reported - row.cached_expected
    assert not row.drop
    assert row.lost_tokens == 0
    assert second.totals.efficiency <= 1.0
    line = second.totals.bottom_line
    assert line.cross_session_tokens == row.cross_session_tokens
    assert line.sentence.endswith(
        f"{row.cross_session_tokens:,} cached tokens came from a prefix another session had cached."
    )
