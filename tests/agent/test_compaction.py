"""Compaction and trimming keep every request reconstructable and the cache explainable."""

from __future__ import annotations

from typing import Any

from tapelog.agent import CompactionPolicy, TrimPolicy, tool
from tapelog.agent._compaction import choose_region
from tapelog.emulator import Emulator
from tapelog.log import decode
from tapelog.log._api import Session

from ._harness import agent_on, assert_bytes_rebuild

LONG_SYSTEM = "\n".join(f"Rule {i}: be exact and brief." for i in range(120))
SUMMARY = "Summary: the user asked three questions about numbers; answers were 1, 2 and 3."


def _assert_rebuilds(session: Session, emulator: Emulator) -> None:
    """Every loop body received is a rebuilt request (one-shot summary calls excluded)."""
    assert_bytes_rebuild(session, emulator, loop_body=lambda body: not _is_summary_call(body))


def _is_summary_call(body: bytes) -> bool:
    """The one-shot summary request ends with the summary instruction."""
    last = decode(body)["messages"][-1]
    return last["role"] == "user" and str(last["content"]).startswith("Summarise the conversation")


def _types(session: Session) -> list[str]:
    return [e.type for e in session.events if e.type != "assistant/chunk"]


async def test_manual_compaction_logs_its_envelope_and_reuses_the_cached_prefix() -> None:
    emulator = Emulator(
        script=[{"text": "one"}, {"text": "two"}, {"text": "three"}, {"text": SUMMARY}]
    )
    policy = CompactionPolicy(keep_messages=2)
    async with agent_on(emulator, system=LONG_SYSTEM, compaction=policy) as agent:
        for prompt in ("first?", "second?", "third?"):
            await agent.run(prompt)
        result = await agent.compact()
        assert result.ok, result.error
        await agent.run("fourth?")
    session = agent.session
    kinds = _types(session)
    start = kinds.index("compact/start")
    assert kinds[start : start + 4] == [
        "compact/start",
        "compact/summary",
        "user/message",
        "compact/end",
    ]
    summary = next(e for e in session.events if e.type == "compact/summary")
    replacing = next(
        e for e in session.events if e.type == "user/message" and e.surface_op != "append"
    )
    assert summary.data["shadowed_seqs"] == list(replacing.source_seqs or [])
    assert replacing.data["source"] == {"kind": "compaction", "id": "c1"}
    assert summary.data["provider"] == "deepseek"
    assert summary.data["max_tokens"] == 1024
    assert summary.data["summary_tokens"] < summary.data["shadowed_tokens"]
    # the summary call replays the conversation up to the cut, so it hits the cache
    call = next(r for r in emulator.received if _is_summary_call(r.body))
    assert call.usage is not None
    assert summary.data["usage"]["cache_read"] > 0
    # after it, the request carries the summary and only the kept messages
    last = decode(emulator.received[-1].body)["messages"]
    assert SUMMARY in last[1]["content"]
    assert [m["role"] for m in last] == ["system", "user", "user", "assistant", "user"]
    _assert_rebuilds(session, emulator)


async def test_a_summary_not_smaller_than_what_it_replaces_is_refused() -> None:
    emulator = Emulator(script=[{"text": "a"}, {"text": "b"}, {"text": "x " * 4000}])
    async with agent_on(emulator, compaction=CompactionPolicy(keep_messages=2)) as agent:
        await agent.run("q1")
        await agent.run("q2")
        before = agent.session.surface
        result = await agent.compact()
    assert not result.ok
    assert "is not smaller than" in (result.error or "")
    assert agent.session.surface == before
    end = agent.session.events[-1]
    assert end.type == "compact/end"
    assert end.data["ok"] is False


async def test_a_compaction_failure_leaves_the_session_consistent_and_usable() -> None:
    emulator = Emulator(
        script=[
            {"text": "a"},
            {"text": "b"},
            {"error": {"status": 400, "message": "no summaries today"}},
            {"text": "c"},
        ]
    )
    async with agent_on(emulator, compaction=CompactionPolicy(keep_messages=2)) as agent:
        await agent.run("q1")
        await agent.run("q2")
        before = agent.session.derive_messages()
        result = await agent.compact()
        assert not result.ok
        assert "no summaries today" in (result.error or "")
        assert agent.session.derive_messages() == before
        follow = await agent.run("q3")
    assert follow.reason["kind"] == "completed"
    _assert_rebuilds(agent.session, emulator)


async def test_an_overflow_triggers_compaction_and_one_successful_retry() -> None:
    big = "lorem ipsum " * 300  # ~900 tokens per answer
    emulator = Emulator(
        script=[{"text": big}, {"text": big}, {"text": SUMMARY}, {"text": "fits now"}],
        context_window=1700,
    )
    async with agent_on(emulator, compaction=CompactionPolicy(keep_messages=1)) as agent:
        await agent.run("q1")
        await agent.run("q2")
        result = await agent.run("q3")
    assert result.reason["kind"] == "completed"
    assert result.text == "fits now"
    events = agent.session.events
    overflow = [
        e for e in events if e.type == "assistant/chunk" and e.data["chunk"].get("overflow") is True
    ]
    assert len(overflow) == 1
    start = next(e for e in events if e.type == "compact/start")
    assert start.data["trigger"] == "overflow"
    assert [r.status for r in emulator.received][-3:] == [400, 200, 200]
    _assert_rebuilds(agent.session, emulator)


async def test_automatic_compaction_when_the_context_passes_the_threshold() -> None:
    big = "lorem ipsum " * 200
    emulator = Emulator(
        script=[{"text": big}, {"text": big}, {"text": big}, {"text": SUMMARY}, {"text": "ok"}]
    )
    policy = CompactionPolicy(context_window=2000, threshold=0.7, keep_messages=2)
    async with agent_on(emulator, compaction=policy) as agent:
        for prompt in ("q1", "q2", "q3", "q4"):
            await agent.run(prompt)
    starts = [e for e in agent.session.events if e.type == "compact/start"]
    assert [s.data["trigger"] for s in starts] == ["auto"]
    assert starts[0].data["context_tokens"] > 0.7 * 2000
    _assert_rebuilds(agent.session, emulator)


@tool
def lookup(key: str) -> str:
    """Look a key up in the directory."""
    return f"{key}: " + "y" * 12_000


async def test_the_cut_never_orphans_a_tool_result() -> None:
    emulator = Emulator(
        script=[
            {"tool_calls": [{"name": "lookup", "arguments": '{"key": "a"}'}]},
            {"text": "found a"},
        ]
    )
    async with agent_on(emulator, tools=[lookup]) as agent:
        await agent.run("find a")
    session = agent.session
    nodes = session.surface
    kinds = [session.event(s).type for s in nodes]
    assert kinds == ["user/message", "assistant/message", "tool/result", "assistant/message"]
    # keeping 2 would start the kept part at the tool result: the cut moves before its call
    region = choose_region(session, keep_messages=2)
    assert region == nodes[:1]
    assert choose_region(session, keep_messages=1) == nodes[:3]


async def test_trimming_is_batched_and_keeps_the_call_id_pairing() -> None:
    script: list[dict[str, Any]] = []
    for key in ("a", "b", "c"):
        script += [
            {"tool_calls": [{"name": "lookup", "arguments": f'{{"key": "{key}"}}'}]},
            {"text": f"found {key}"},
        ]
    emulator = Emulator(script=script)
    trimming = TrimPolicy(max_chars=4000, head_chars=200, tail_chars=100, batch_chars=20_000)
    async with agent_on(emulator, tools=[lookup], trimming=trimming) as agent:
        await agent.run("find a")
        await agent.run("find b")
        trims_after_two = [
            e for e in agent.session.events if e.type == "tool/result" and e.surface_op != "append"
        ]
        await agent.run("find c")
    assert trims_after_two == [], "one old result frees too little: no trim yet"
    session = agent.session
    trims = [e for e in session.events if e.type == "tool/result" and e.surface_op != "append"]
    assert len(trims) == 2, "both old results are trimmed in one batch"
    for trim in trims:
        original = session.event(trim.surface_op["start"])
        assert trim.data["call_id"] == original.data["call_id"]
        assert "[... 11703 characters trimmed ...]" in trim.data["content"]
        assert list(trim.source_seqs or []) == [original.seq]
    last = decode(emulator.received[-1].body)["messages"]
    calls = {c["id"] for m in last if m["role"] == "assistant" for c in m.get("tool_calls", [])}
    results = {m["tool_call_id"] for m in last if m["role"] == "tool"}
    assert calls == results
    assert sum("characters trimmed" in m["content"] for m in last if m["role"] == "tool") == 2
    _assert_rebuilds(session, emulator)
