"""The cache audit on real sessions (agent + in-process emulator) and on a
synthetic log with compaction and trimming."""

from __future__ import annotations

from typing import Any

import pytest

from agent._harness import LONG_SYSTEM, add, agent_on, shout
from tapelog.audit import CacheReport, cache_report, encode_request, rebuild_requests
from tapelog.audit._api import CacheWatch
from tapelog.audit._segments import SegmentRenderer
from tapelog.cache._api import anthropic_sources, chain_segments, openai_sources, prefix_root
from tapelog.emulator import Emulator
from tapelog.log import decode
from tapelog.log._api import Session
from tapelog.request import walk_requests

from ._sessions import LogBuilder, add_call

PROVIDERS = ["deepseek", "openai", "anthropic"]


def _kinds(report: CacheReport) -> list[list[str]]:
    return [[c.kind for c in row.causes] for row in report.requests]


def _reported(emulator: Emulator) -> list[int]:
    """cache-read tokens of each successful answer, as the emulator reported them."""
    out: list[int] = []
    for r in emulator.received:
        if r.usage is None:
            continue
        usage: Any = r.usage
        if r.rule == "anthropic":
            out.append(usage["cache_read_input_tokens"])
        else:
            out.append(usage["prompt_tokens_details"]["cached_tokens"])
    return out


async def _busy_session(emulator: Emulator, provider: str) -> Session:
    """Tool calls, a tool registration, a system change and injected context."""
    session = Session()
    emulator.push(add_call(2, 3), {"text": "5."}, {"text": "ok"}, add_call(1, 1), {"text": "2."})
    async with agent_on(
        emulator, provider=provider, session=session, system=LONG_SYSTEM, tools=[add]
    ) as agent:
        await agent.run("What is 2 + 3?")
        agent.add_tool(shout)
        await agent.run("Noted?")
        agent.system = LONG_SYSTEM + "\nBe brief."
        agent.inject("The user prefers digits.")
        await agent.run("Add 1 and 1.")
    return session


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_incremental_segments_equal_the_emulators_rendering_of_each_body(
    provider: str,
) -> None:
    session = await _busy_session(Emulator(), provider)
    renderer = SegmentRenderer()
    rebuilt = rebuild_requests(session.events)
    walked = 0
    for item, step in zip(rebuilt, walk_requests(session.events), strict=True):
        rule, prompt = renderer.render(
            step.header, step.nodes, appended_only=not step.replaced_since
        )
        body = decode(encode_request(item.request))
        sources = anthropic_sources(body) if rule == "anthropic" else openai_sources(body)
        full = chain_segments(
            prefix_root(rule, body["model"], body.get("prompt_cache_key")), sources
        )
        assert [s.key for s in prompt.segments] == [s.key for s in full], item.index
        assert list(prompt.ends) == [sum(s.tokens for s in full[: i + 1]) for i in range(len(full))]
        assert list(prompt.points) == [i for i, s in enumerate(full) if s.breakpoint]
        walked += 1
    assert walked == len(rebuilt) == 5


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_the_live_watch_gives_the_reports_rows_as_the_log_grows(provider: str) -> None:
    session = await _busy_session(Emulator(), provider)
    growing = Session(id=session.id)
    watch = CacheWatch(growing)
    rows = []
    for event in session.events:
        growing.replay(event)
        if event.type == "turn/end":
            rows.extend(watch.advance())
    assert rows == list(cache_report(session).requests)
    assert len(rows) == 5


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_expected_equals_reported_and_a_tool_registration_is_a_header_delta(
    provider: str,
) -> None:
    emulator = Emulator()
    session = await _busy_session(emulator, provider)
    report = cache_report(session)
    assert [r.cached_expected for r in report.requests] == _reported(emulator)
    assert [r.cached_reported for r in report.requests] == _reported(emulator)
    assert report.totals.efficiency == 1.0
    assert report.totals.cached_reported > 0
    assert all(c.kind != "unexplained" for row in report.requests for c in row.causes)
    kinds = _kinds(report)
    # Turn 2 (request 3) registered shout; turn 3 step 1 (request 4) changed the system.
    assert kinds == [[], [], ["header-delta"], ["header-delta"], []]
    assert [r.drop for r in report.requests] == [False, False, True, True, False]
    tools = report.requests[2].causes[0]
    assert tools.detail["tools"]["added"] == ["shout"]
    assert tools.label == "tools +shout"
    system = report.requests[3].causes[0]
    assert system.detail["fields"] == ["system"]
    assert system.label == "system 1 line"
    assert report.requests[2].causes[0].seqs == (report.requests[2].seq + 1,)


async def test_a_tool_reorder_is_a_header_fallback() -> None:
    emulator = Emulator(script=[{"text": "a"}, {"text": "b"}])
    session = Session()
    async with agent_on(emulator, session=session, tools=[add, shout]) as agent:
        await agent.run("one")
        agent.tool_order = ["shout", "add"]
        await agent.run("two")
    report = cache_report(session)
    cause = report.requests[1].causes[0]
    assert (cause.kind, cause.label) == ("header-fallback", "fallback: tools reordered")
    assert session.events[cause.seqs[0]].data["reason"] == "fallback"
    assert report.totals.efficiency == 1.0


async def test_resume_with_another_model_is_resume_drift_and_without_change_no_cause() -> None:
    emulator = Emulator(script=[{"text": "a"}, {"text": "b"}, {"text": "c"}])
    session = Session()
    async with agent_on(emulator, session=session, system=LONG_SYSTEM) as agent:
        await agent.run("one")
    async with agent_on(emulator, session=session, system=LONG_SYSTEM) as agent:
        await agent.run("two")  # a resume snapshot equal to the fold: no cause
    async with agent_on(emulator, session=session, system=LONG_SYSTEM) as agent:
        agent.config = agent.config.replace(model="deepseek-reasoner")
        await agent.run("three")
    report = cache_report(session)
    resumes = [e for e in session.events if e.data.get("reason") == "resume"]
    assert len(resumes) == 2
    assert [r.drop for r in report.requests] == [False, False, True]
    assert _kinds(report) == [[], [], ["resume-drift"]]
    drift = report.requests[2].causes[0]
    assert drift.seqs == (resumes[1].seq,)
    assert drift.detail["config"] == {"model": ["deepseek-chat", "deepseek-reasoner"]}
    assert drift.label == "resume drift: config"
    assert report.requests[1].cached_reported == report.requests[1].cached_expected > 0
    assert report.totals.efficiency == 1.0


async def test_a_provider_cache_reset_is_an_unexplained_drop() -> None:
    emulator = Emulator(script=[{"text": "a"}, {"text": "b"}])
    session = Session()
    async with agent_on(emulator, session=session, system=LONG_SYSTEM) as agent:
        await agent.run("one")
        emulator.reset_cache()
        await agent.run("two")
    report = cache_report(session)
    row = report.requests[1]
    assert row.drop
    assert row.cached_reported == 0 < row.cached_expected
    assert [(c.kind, c.label) for c in row.causes] == [("unexplained", "unexplained")]
    assert row.causes[0].detail == {
        "reason": "reported below expected",
        "reported": 0,
        "expected": row.cached_expected,
    }
    assert report.totals.efficiency == 0.0


async def test_retries_of_one_request_are_one_row() -> None:
    emulator = Emulator(script=[{"error": {"status": 429, "message": "slow down"}}, {"text": "a"}])
    session = Session()
    async with agent_on(emulator, session=session) as agent:
        await agent.run("one")
    report = cache_report(session)
    assert len(emulator.received) == 2
    assert len(report.requests) == 1
    assert report.requests[0].prompt_tokens > 0


def test_trimming_and_compaction_are_attributed_to_their_events() -> None:
    log = LogBuilder()
    log.user("Shout twice.")
    first = log.tool_round("c1", "x" * 1000, header=True)
    second = log.tool_round("c2", "y" * 1000)
    log.answer("Done.")
    log.user("Again?")
    trims = [log.trim(first), log.trim(second)]
    log.answer("Trimmed.")
    log.user("Summarise.")
    compaction = log.compact("c7", 1, trims[1].seq)
    log.answer("Compacted.")
    report = cache_report(log.session.events, session_id="synthetic")
    assert report.session == "synthetic"
    kinds = _kinds(report)
    assert kinds == [[], [], [], ["trim"], ["compaction"]]
    trim = report.requests[3].causes[0]
    assert trim.seqs == tuple(t.seq for t in trims)
    assert trim.detail == {"results": 2, "replaced": [first.seq, second.seq]}
    assert trim.label == "trim 2 results"
    summary = report.requests[4].causes[0]
    assert summary.seqs == tuple(e.seq for e in compaction)
    assert summary.detail["id"] == "c7"
    assert summary.detail["replacing_seq"] == compaction[2].seq
    assert summary.detail["shadowed"] == {"start": 1, "end": trims[1].seq}
    assert summary.label == "compaction c7"
    # The trimmed results sit after the first user message: that prefix still hits.
    assert 0 < report.requests[3].shared_prefix_tokens < report.requests[2].prompt_tokens


def test_a_failed_compaction_is_no_cause() -> None:
    log = LogBuilder()
    log.user("One.")
    log.answer("A.", header=True)
    log.user("Two.")
    log.append("compact/start", {"id": "c1", "trigger": "auto", "turn": 2, "context_tokens": 9})
    log.append("compact/end", {"id": "c1", "ok": False, "error": {"type": "X", "message": "no"}})
    log.answer("B.")
    report = cache_report(log.session)
    assert _kinds(report) == [[], []]
    assert not report.requests[1].drop


REQUEST_KEYS = [
    "index",
    "turn",
    "step",
    "seq",
    "provider",
    "model",
    "rule",
    "prompt_tokens",
    "cached_reported",
    "cached_expected",
    "shared_prefix_tokens",
    "drop",
    "lost_tokens",
    "cross_session_tokens",
    "causes",
]


async def test_the_json_shape_is_exactly_the_documented_one() -> None:
    emulator = Emulator()
    session = await _busy_session(emulator, "deepseek")
    data = cache_report(session).to_json()
    assert list(data) == ["session", "requests", "totals"]
    assert data["session"] == session.id
    assert all(list(row) == REQUEST_KEYS for row in data["requests"])
    causes = [c for row in data["requests"] for c in row["causes"]]
    assert causes
    assert all(list(c) == ["kind", "seqs", "detail"] for c in causes)
    assert list(data["totals"]) == [
        "requests",
        "prompt_tokens",
        "cached_reported",
        "cached_expected",
        "hit_ratio",
        "efficiency",
        "lost_tokens",
        "breaks",
        "lost_by_cause",
        "cross_session_tokens",
        "bottom_line",
    ]
    totals = data["totals"]
    assert totals["hit_ratio"] == totals["cached_reported"] / totals["prompt_tokens"]


def test_an_empty_log_has_no_rows_and_neutral_totals() -> None:
    report = cache_report(Session("empty"))
    assert report.requests == ()
    assert (report.totals.hit_ratio, report.totals.efficiency) == (0.0, 1.0)
