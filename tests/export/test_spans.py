"""The span mapping itself (``tapelog.export.otel_spans``), for what the wire tests do not run:
a compaction's summary call, and a log that ends mid-turn (a crash not yet repaired)."""

from __future__ import annotations

from agent._harness import agent_on
from tapelog.agent import CompactionPolicy
from tapelog.emulator import Emulator
from tapelog.export import OtelSpan, otel_spans
from tapelog.log._api import Session

SYSTEM = "\n".join(f"Rule {i}: be exact and brief." for i in range(120))
SUMMARY = "Summary: the user asked three questions; the answers were 1, 2 and 3."


def _by_seq(spans: tuple[OtelSpan, ...]) -> dict[object, OtelSpan]:
    return {s.attributes.get("tapelog.seq"): s for s in spans}


async def test_a_compaction_summary_call_is_a_chat_span_with_its_usage() -> None:
    emulator = Emulator(script=[{"text": "1"}, {"text": "2"}, {"text": "3"}, {"text": SUMMARY}])
    async with agent_on(
        emulator, system=SYSTEM, compaction=CompactionPolicy(keep_messages=2)
    ) as agent:
        for prompt in ("first?", "second?", "third?"):
            await agent.run(prompt)
        assert (await agent.compact()).ok
    session = agent.session
    events = session.events
    start = next(e for e in events if e.type == "compact/start")
    summary = next(e for e in events if e.type == "compact/summary")
    end = next(e for e in events if e.type == "compact/end")
    trace = otel_spans(session, content=True)
    span = _by_seq(trace.spans)[start.seq]
    root = next(s for s in trace.spans if s.parent_id is None)
    assert span.name == "chat deepseek-chat"
    assert span.kind == "client"
    assert span.parent_id == root.span_id  # asked for between turns
    assert (span.start_ns, span.end_ns) == (start.time * 10**6, end.time * 10**6)
    assert span.error is None
    a = span.attributes
    usage = summary.data["usage"]
    assert a["tapelog.compaction.id"] == "c1"
    assert a["tapelog.compaction.trigger"] == "manual"
    assert a["gen_ai.request.max_tokens"] == summary.data["max_tokens"]
    assert a["gen_ai.usage.cache_read.input_tokens"] == usage["cache_read"] > 0
    assert a["gen_ai.usage.input_tokens"] == (
        usage["input"] + usage["cache_read"] + usage["cache_write"]
    )
    assert SUMMARY in str(a["gen_ai.output.messages"])
    assert "Summarise the conversation" in str(a["gen_ai.input.messages"])
    assert trace.model_calls == 4


def test_what_a_log_leaves_open_ends_with_the_log() -> None:
    session = Session("crashed")
    session.append("turn/start", {"turn": 1})
    session.append(
        "user/message",
        {"content": [{"type": "text", "text": "hi"}], "source": {"kind": "user"}},
        surface_op="append",
    )
    step = session.append("step/start", {"turn": 1, "step": 1})
    header = {"config": {"provider": "openai", "model": "gpt-4.1-mini"}}
    session.append("request/header", {"header": header, "reason": "initial"})
    last = session.append(
        "assistant/chunk", {"turn": 1, "step": 1, "chunk": {"kind": "text", "text": "he"}}
    )
    trace = otel_spans(session)
    by_seq = _by_seq(trace.spans)
    chat = by_seq[step.seq]
    turn = by_seq[0]
    assert chat.name == "chat gpt-4.1-mini"
    assert chat.attributes["tapelog.open"] is True
    assert turn.attributes["tapelog.open"] is True
    assert chat.end_ns == turn.end_ns == last.time * 10**6
    assert chat.parent_id == turn.span_id
    assert chat.attributes["gen_ai.provider.name"] == "openai"
    assert chat.attributes["tapelog.header_seqs"] == (step.seq + 1,)
    assert "gen_ai.usage.input_tokens" not in chat.attributes
    assert (chat.error, turn.error) == (None, None)  # unknown outcome, not a failure
