"""The walk's runs of records make the very requests of the walk event by event.

``walk_requests`` over a session hands the runs of events it reads the type of
alone (streamed chunks other than errors, ``turn/end``, ``tool/call``) to the
walker as records (``iter_event_runs``); :class:`RequestWalker` visits every
event. On random loop sessions -- chunks of several kinds, errors among them,
tool calls, header changes inside steps and after a step's output, steps not
sent, one-shot compaction calls logged inside an open step, records sealed
into blocks, a log cut anywhere -- both must give the same requests, field by
field and body by body.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest.mock import patch

from hypothesis import given, settings
from hypothesis import strategies as st

from audit._sessions import HEADER, LogBuilder
from tapelog.log import _record_blocks
from tapelog.log._api import Session, iter_event_runs
from tapelog.log._record_blocks import RecordBlock
from tapelog.request import walk_requests
from tapelog.request._api import RequestWalker, WalkedRequest

_KINDS = ("text", "reasoning", "error", "")  # "": a kind the record cannot name

_step = st.fixed_dictionaries(
    {
        "header": st.booleans(),
        "chunks": st.lists(st.sampled_from(_KINDS), max_size=6),
        "late_header": st.booleans(),
        "one_shot": st.sampled_from([None, True, False]),
        "sent": st.booleans(),
        "tool": st.booleans(),
    }
)
_turns = st.lists(st.lists(_step, min_size=1, max_size=3), min_size=1, max_size=4)


@contextmanager
def _sealing(limit: int | None) -> Iterator[None]:
    if limit is None:
        yield
        return
    with (
        patch.object(_record_blocks, "BLOCK_BYTES", limit),
        patch.object(_record_blocks, "CHECK_EVERY", 1),
    ):
        yield


def _build(turns: list[list[dict[str, Any]]]) -> Session:
    log = LogBuilder()
    for t, steps in enumerate(turns):
        log.user(f"question {t}")
        for s, spec in enumerate(steps):
            log.step += 1
            where = {"turn": log.turn, "step": log.step}
            log.append("step/start", where)
            if spec["header"] or (t, s) == (0, 0):
                header = {**HEADER, "system": f"system {t}.{s}"}
                log.append("request/header", {"header": header, "reason": "resume"})
            for i, kind in enumerate(spec["chunks"]):
                log.append("assistant/chunk", {**where, "chunk": {"kind": kind, "text": f"c{i}"}})
            if spec["late_header"]:  # after the output: the next request's, not this one's
                header = {**HEADER, "system": f"later {t}.{s}"}
                log.append("request/header", {"header": header, "reason": "resume"})
            if spec["one_shot"] is not None:
                cid = f"c{t}.{s}"
                start = {"id": cid, "trigger": "manual", "turn": log.turn, "context_tokens": 9}
                region = list(log.session.surface)
                start |= {"region": region, "instruction": "Sum up.", "max_tokens": 64}
                log.append("compact/start", start)
                end: dict[str, Any] = {
                    "id": cid,
                    "ok": False,
                    "error": {"type": "x", "message": "y"},
                }
                log.append("compact/end", end if spec["one_shot"] else {**end, "sent": False})
            if spec["sent"]:
                source = {"provider": "deepseek", "model": "deepseek-chat"}
                call = {"call_id": f"k{t}.{s}", "name": "shout", "arguments": "{}"}
                content = [{"type": "text", "text": f"answer {t}.{s}"}]
                if spec["tool"]:
                    content = [{"type": "tool_call", "id": call["call_id"], **call}]
                    del content[0]["call_id"]
                answer = {**where, "content": content, "source": source}
                log.append("assistant/message", answer, surface_op="append")
                if spec["tool"]:
                    tool = log.append("tool/call", {**where, **call})
                    result = {
                        **where,
                        "call_id": call["call_id"],
                        "content": "ok",
                        "is_error": False,
                    }
                    log.append("tool/result", result, surface_op="append", source_seqs=[tool.seq])
                log.append("step/end", where)
            else:
                log.append("step/end", {**where, "sent": False, "error": {"message": "z"}})
        log.append("turn/end", {"turn": log.turn, "reason": {"kind": "completed"}})
    return log.session


def _visited(session: Session) -> list[WalkedRequest]:
    """The walk event by event, as the proxy's live audit feeds it."""
    walker = RequestWalker(session.events, session.id, True)
    out = [walked for event in session.events for walked in walker.visit(event)]
    return out + list(walker.finish())


def _fields(walked: WalkedRequest) -> dict[str, Any]:
    fields = {f.name: getattr(walked, f.name) for f in dataclasses.fields(walked)}
    fields["nodes"] = list(walked.nodes)
    return fields


@settings(max_examples=60, deadline=None)
@given(_turns, st.sampled_from([None, 1, 200]), st.integers(0, 10**6))
def test_runs_of_chunks_walk_as_every_event(
    turns: list[list[dict[str, Any]]], seal: int | None, cut: int
) -> None:
    with _sealing(seal):
        session = _build(turns)
    if seal is None:  # a log cut anywhere, read back as a load does
        events = list(session.events)
        session = Session.from_events(events[: 1 + cut % len(events)], id=session.id)
    elif seal == 1:
        assert any(type(item) is RecordBlock for item in session.events.items)
    runs = list(walk_requests(session, one_shots=True))
    visited = _visited(session)
    assert [_fields(w) for w in runs] == [_fields(w) for w in visited]
    assert [w.request() for w in runs] == [w.request() for w in visited]


@given(_turns, st.sampled_from([None, 1, 200]))
def test_the_runs_are_the_events_that_are_not_made(
    turns: list[list[dict[str, Any]]], seal: int | None
) -> None:
    with _sealing(seal):
        session = _build(turns)
    made = []
    for item in iter_event_runs(session.events.items):
        if isinstance(item, list):
            made += [session.events[len(made) + i] for i in range(len(item))]
            for event in made[-len(item) :]:
                assert event.type in {"assistant/chunk", "turn/end", "tool/call"}
                assert event.type != "assistant/chunk" or event.data["chunk"]["kind"] not in {
                    "error",
                    "",
                }
        else:
            assert item.seq == len(made)
            made.append(item)
    assert made == list(session.events)
