"""A session log as OpenTelemetry spans, following the GenAI semantic conventions.

One pass over the log (docs/otel.md has the full mapping):

* the **session** is the trace, with one root span ``tapelog.session``;
* each **turn** (``turn/start`` .. ``turn/end``) is an ``invoke_agent`` span;
* each **step** (one model request) is a ``chat {model}`` span from its
  ``step/start`` to its ``assistant/message`` (the model call; the step's
  tools run after it), and each compaction summary call is one too;
* each **tool call** (``tool/call`` .. ``tool/result``) is an
  ``execute_tool {name}`` span, a child of the step that asked for it.

Times are the events' ``time`` (epoch ms). Token usage is the logged
(normalised) usage; the cache audit's row for the request
(:func:`tapelog.audit.cache_report`) adds what the cache should have read and
why it did not. Without ``content`` no text from the log leaves: names,
numbers and error types only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from tapelog.audit import cache_report
from tapelog.audit._api import RequestCache
from tapelog.export import _semconv as sc
from tapelog.export._attributes import (
    cache_attributes,
    config_attributes,
    totals_attributes,
    usage_attributes,
)
from tapelog.export._content import input_attributes, output_messages, tool_result_text
from tapelog.export._model import (
    AttributeValue,
    OtelSpan,
    OtelTrace,
    SpanEvent,
    span_id,
    trace_id,
)
from tapelog.log import redact
from tapelog.log._api import EpochHeader, Event, Session, chunk_kind, fold_header_event
from tapelog.request import walk_requests
from tapelog.request._api import WalkedRequest

__all__ = ["otel_spans"]

_MS = 1_000_000
_MESSAGE_CHARS = 1000
"""Longest error message kept in a span status (with ``content`` only)."""
_ERROR_TURNS = frozenset({"error", "interrupted"})
"""Turn end reasons that are failures (docs/otel.md, "Status")."""


@dataclass
class _Draft:
    """A span being built; frozen into an :class:`OtelSpan` at the end."""

    name: str
    kind: Literal["internal", "client"]
    span_id: int
    parent_id: int | None
    start: int
    end: int | None = None
    attributes: dict[str, AttributeValue] = field(default_factory=dict)
    events: list[SpanEvent] = field(default_factory=list)
    error: str | None = None
    links: tuple[tuple[int, int], ...] = ()


@dataclass
class _Step:
    draft: _Draft
    start: Event
    header_seqs: list[int] = field(default_factory=list)
    finish: Mapping[str, Any] | None = None
    message: Event | None = None


def _error_text(kind: str, message: Any, content: bool) -> str:
    """A status description: the error's type, and its message with ``content``."""
    if content and isinstance(message, str) and message:
        return f"{kind}: {redact(message)[:_MESSAGE_CHARS]}"
    return kind


class _Builder:
    def __init__(self, session: Session, content: bool) -> None:
        self.sid = session.id
        self.trace = trace_id(self.sid)
        self.content = content
        self.report = cache_report(session)
        self.cache: dict[int, RequestCache] = {row.seq: row for row in self.report.requests}
        self.walked: dict[int, WalkedRequest] = {}
        if content:
            walked = walk_requests(session, one_shots=True)
            self.walked = {w.boundary_seq: w for w in walked}
        self.header: EpochHeader | None = None
        self.root_id = span_id(self.sid, "session")
        self.turn: _Draft | None = None
        self.turn_chats: list[tuple[_Draft, Event | None]] = []
        self.step: _Step | None = None
        self.calls: dict[str, _Draft] = {}
        self.compactions: dict[str, _Draft] = {}
        self.done: list[_Draft] = []
        self.counts = {"turn": 0, "chat": 0, "tool": 0}

    # --- spans -------------------------------------------------------------

    def _open(self, name: str, kind: Literal["internal", "client"], event: Event) -> _Draft:
        parent = self.turn.span_id if self.turn is not None else self.root_id
        draft = _Draft(name, kind, span_id(self.sid, event.seq), parent, event.time * _MS)
        draft.attributes[sc.GEN_AI_CONVERSATION_ID] = self.sid
        draft.attributes["tapelog.seq"] = event.seq
        return draft

    def _close(self, draft: _Draft, event: Event | None, end_time: int) -> None:
        """End ``draft`` at ``end_time`` (ms); no closing ``event``: the log ends first."""
        if event is None:
            draft.attributes["tapelog.open"] = True
        else:
            draft.attributes["tapelog.end_seq"] = event.seq
        draft.end = max(draft.start, end_time * _MS)
        self.done.append(draft)

    def _model_attributes(self, draft: _Draft, header: EpochHeader | None) -> None:
        draft.attributes[sc.GEN_AI_OPERATION_NAME] = sc.OP_CHAT
        if header is not None:
            draft.attributes.update(config_attributes(header.config))

    def _input_content(self, draft: _Draft, seq: int) -> None:
        walked = self.walked.get(seq)
        if walked is not None:
            draft.attributes.update(input_attributes(walked.request()))

    # --- turns -------------------------------------------------------------

    def turn_start(self, event: Event) -> None:
        self._close_open_turn(event.time)
        draft = self._open(sc.OP_INVOKE_AGENT, "internal", event)
        draft.attributes[sc.GEN_AI_OPERATION_NAME] = sc.OP_INVOKE_AGENT
        draft.attributes["tapelog.turn"] = event.data["turn"]
        self.turn = draft
        self.turn_chats = []
        self.counts["turn"] += 1

    def turn_end(self, event: Event) -> None:
        self.step_end(None, event.time)
        draft = self.turn
        if draft is None:
            return
        reason = event.data["reason"]
        kind = str(reason["kind"])
        draft.attributes["tapelog.turn.end_reason"] = kind
        for chat, _ in self.turn_chats[:1]:  # the model the turn started with
            for name in (sc.GEN_AI_PROVIDER_NAME, sc.GEN_AI_REQUEST_MODEL):
                if name in chat.attributes:
                    draft.attributes[name] = chat.attributes[name]
        if kind in _ERROR_TURNS:
            error = reason.get("error")
            error = error if isinstance(error, Mapping) else {}
            etype = str(error.get("type") or kind)
            draft.attributes[sc.ERROR_TYPE] = etype
            draft.error = _error_text(etype, error.get("message"), self.content)
            # The model call that never answered failed with the turn's error.
            for chat, message in self.turn_chats[-1:]:
                if chat.error is None and message is not None and message.data.get("interrupted"):
                    chat.attributes[sc.ERROR_TYPE] = etype
                    chat.error = draft.error
        self._close(draft, event, event.time)
        self.turn = None

    # --- steps -------------------------------------------------------------

    def _close_open_turn(self, time: int) -> None:
        """Close a turn (and its step) the log never closed: it ends at ``time``."""
        self.step_end(None, time)
        if self.turn is not None:
            self._close(self.turn, None, time)
            self.turn = None

    def step_start(self, event: Event) -> None:
        self.step_end(None, event.time)  # a step/start without the previous step/end
        draft = self._open(sc.OP_CHAT, "client", event)
        draft.attributes["tapelog.turn"] = event.data["turn"]
        draft.attributes["tapelog.step"] = event.data["step"]
        self.step = _Step(draft, event)
        self.counts["chat"] += 1

    def header_event(self, event: Event) -> None:
        self.header = fold_header_event(self.header, event)
        step = self.step
        if step is not None and step.message is None:
            step.header_seqs.append(event.seq)

    def chunk(self, event: Event) -> None:
        step = self.step
        kind = chunk_kind(event)
        if step is None or kind not in ("error", "finish"):
            return
        chunk = event.data["chunk"]
        if kind == "finish":
            step.finish = chunk
            return
        step.finish = None  # an attempt failed: what it streamed is not the answer
        attrs: dict[str, AttributeValue] = {"tapelog.seq": event.seq}
        for key, name in (
            ("attempt", "tapelog.attempt"),
            ("status", sc.HTTP_RESPONSE_STATUS_CODE),
            ("retry_in_ms", "tapelog.retry_in_ms"),
            ("retry_after_ms", "tapelog.retry_after_ms"),
            ("overflow", "tapelog.overflow"),
        ):
            value = chunk.get(key)
            if isinstance(value, bool | int):
                attrs[name] = value
        if self.content and isinstance(chunk.get("message"), str):
            attrs["tapelog.message"] = redact(chunk["message"])[:_MESSAGE_CHARS]
        step.draft.events.append(
            SpanEvent(name="tapelog.attempt_failed", time_ns=event.time * _MS, attributes=attrs)
        )

    def message(self, event: Event) -> None:
        if self.step is not None:
            self.step.message = event

    def step_end(self, event: Event | None, end_time: int) -> None:
        """Close the open step at its ``step/end`` (``None``: the log left it open)."""
        step = self.step
        if step is None:
            return
        self.step = None
        draft = step.draft
        self._model_attributes(draft, self.header)
        attrs = draft.attributes
        if step.header_seqs:
            attrs["tapelog.header_seqs"] = tuple(step.header_seqs)
        if draft.events:
            attrs["tapelog.failed_attempts"] = len(draft.events)
        self._answer(step, attrs)
        self._cache(step.start.seq, attrs)
        error = event.data.get("error") if event is not None else None
        if event is not None and event.data.get("sent") is False:
            attrs["tapelog.sent"] = False
        if isinstance(error, Mapping):
            etype = str(error.get("type") or "error")
            attrs[sc.ERROR_TYPE] = etype
            draft.error = _error_text(etype, error.get("message"), self.content)
        if self.content:
            self._input_content(draft, step.start.seq)
        # The span is the model call: it ends when the answer is logged (the
        # step's tools run after it, as its children).
        self._close(draft, event, step.message.time if step.message else end_time)
        self.turn_chats.append((draft, step.message))

    def _answer(self, step: _Step, attrs: dict[str, AttributeValue]) -> None:
        message = step.message
        if message is None:
            return
        data = message.data
        attrs["tapelog.message_seq"] = message.seq
        if data.get("usage") or not data.get("interrupted"):  # the provider did answer
            attrs[sc.GEN_AI_RESPONSE_MODEL] = str(data["source"]["model"])
        attrs.update(usage_attributes(data.get("usage")))
        reason = None
        if step.finish is not None:
            raw = str(step.finish.get("reason"))
            reason = sc.FINISH_REASONS.get(raw, raw)
            attrs[sc.GEN_AI_RESPONSE_FINISH_REASONS] = (reason,)
        if data.get("interrupted"):
            attrs["tapelog.interrupted"] = True
        if self.content and data["content"]:
            attrs[sc.GEN_AI_OUTPUT_MESSAGES] = output_messages(data["content"], reason)

    def _cache(self, seq: int, attrs: dict[str, AttributeValue]) -> None:
        row = self.cache.get(seq)
        if row is not None:
            attrs.update(cache_attributes(row))

    # --- tools -------------------------------------------------------------

    def tool_call(self, event: Event) -> None:
        data = event.data
        name = str(data["name"])
        draft = self._open(f"{sc.OP_EXECUTE_TOOL} {name}", "internal", event)
        if self.step is not None:
            draft.parent_id = self.step.draft.span_id
        attrs = draft.attributes
        attrs[sc.GEN_AI_OPERATION_NAME] = sc.OP_EXECUTE_TOOL
        attrs[sc.GEN_AI_TOOL_NAME] = name
        attrs[sc.GEN_AI_TOOL_CALL_ID] = str(data["call_id"])
        attrs[sc.GEN_AI_TOOL_TYPE] = "function"
        attrs["tapelog.turn"] = data["turn"]
        attrs["tapelog.step"] = data["step"]
        if self.content:
            attrs[sc.GEN_AI_TOOL_CALL_ARGUMENTS] = redact(str(data["arguments"]))
        self.calls[str(data["call_id"])] = draft
        self.counts["tool"] += 1

    def tool_result(self, event: Event) -> None:
        draft = self.calls.pop(str(event.data["call_id"]), None)
        if draft is None:
            return
        data = event.data
        attrs = draft.attributes
        attrs["tapelog.tool.is_error"] = bool(data["is_error"])
        if data["is_error"]:
            error = data.get("error")
            info = error if isinstance(error, Mapping) else {}
            etype = str(info.get("type") or info.get("kind") or "tool_error")
            attrs[sc.ERROR_TYPE] = etype
            message = info.get("message") if info else error
            draft.error = _error_text(etype, message, self.content)
        if self.content:
            attrs[sc.GEN_AI_TOOL_CALL_RESULT] = tool_result_text(data["content"])
        self._close(draft, event, event.time)

    # --- compaction --------------------------------------------------------

    def compact_start(self, event: Event) -> None:
        if not event.data.get("region"):
            return  # nothing to summarise: no model call was made
        draft = self._open(sc.OP_CHAT, "client", event)
        cid = str(event.data.get("id", event.seq))
        draft.attributes["tapelog.compaction.id"] = cid
        if isinstance(event.data.get("trigger"), str):
            draft.attributes["tapelog.compaction.trigger"] = event.data["trigger"]
        self._model_attributes(draft, self.header)
        if isinstance(event.data.get("max_tokens"), int):
            draft.attributes[sc.GEN_AI_REQUEST_MAX_TOKENS] = event.data["max_tokens"]
        if self.content:
            self._input_content(draft, event.seq)
        self.compactions[cid] = draft
        self.counts["chat"] += 1

    def compact_summary(self, event: Event) -> None:
        draft = self.compactions.get(str(event.data.get("id")))
        if draft is not None:
            attrs = draft.attributes
            attrs[sc.GEN_AI_PROVIDER_NAME] = attrs[sc.GEN_AI_SYSTEM] = event.data["provider"]
            attrs[sc.GEN_AI_RESPONSE_MODEL] = event.data["model"]
            attrs.update(usage_attributes(event.data.get("usage")))

    def compact_output(self, event: Event) -> None:
        source = event.data["source"]
        draft = self.compactions.get(str(source.get("id")))
        if draft is not None and self.content:
            draft.attributes[sc.GEN_AI_OUTPUT_MESSAGES] = output_messages(
                event.data["content"], None
            )

    def compact_end(self, event: Event) -> None:
        draft = self.compactions.pop(str(event.data.get("id")), None)
        if draft is None:
            return
        if event.data.get("sent") is False:
            draft.attributes["tapelog.sent"] = False
        if event.data.get("ok") is False:
            error = event.data.get("error")
            info = error if isinstance(error, Mapping) else {}
            etype = str(info.get("type") or "error")
            draft.attributes[sc.ERROR_TYPE] = etype
            draft.error = _error_text(etype, info.get("message"), self.content)
        self._close(draft, event, event.time)

    # --- the pass ----------------------------------------------------------

    def run(self, events: Sequence[Event]) -> list[_Draft]:
        handlers = {
            "turn/start": self.turn_start,
            "turn/end": self.turn_end,
            "step/start": self.step_start,
            "request/header": self.header_event,
            "request/header-delta": self.header_event,
            "assistant/chunk": self.chunk,
            "assistant/message": self.message,
            "tool/call": self.tool_call,
            "tool/result": self.tool_result,
            "compact/start": self.compact_start,
            "compact/summary": self.compact_summary,
            "compact/end": self.compact_end,
        }
        last_time = 0
        for event in events:
            last_time = max(last_time, event.time)
            etype = event.type
            if etype == "step/end":
                self.step_end(event, event.time)
            elif etype == "user/message" and event.data["source"].get("kind") == "compaction":
                self.compact_output(event)
            else:
                handler = handlers.get(etype)
                if handler is not None:
                    handler(event)
        # What the log leaves open (a crash not yet repaired) ends with the log.
        for draft in self.calls.values():
            self._close(draft, None, last_time)
        for draft in self.compactions.values():
            self._close(draft, None, last_time)
        self._close_open_turn(last_time)
        return self.done

    def root_span(self, session: Session, events: Sequence[Event]) -> _Draft:
        times = [e.time for e in events] or [session.info.created]
        draft = _Draft("tapelog.session", "internal", self.root_id, None, min(times) * _MS)
        draft.end = max(draft.start, max(times) * _MS)
        attrs = draft.attributes
        attrs[sc.GEN_AI_CONVERSATION_ID] = self.sid
        attrs["tapelog.events"] = len(events)
        attrs["tapelog.turns"] = self.counts["turn"]
        attrs.update(totals_attributes(self.report.totals))
        parent = session.info.parent
        if parent:
            attrs["tapelog.session.parent"] = parent
            if session.info.seed_length is not None:
                attrs["tapelog.session.seed_length"] = session.info.seed_length
            draft.links = ((trace_id(parent), span_id(parent, "session")),)
        return draft


def otel_spans(session: Session, *, content: bool = False) -> OtelTrace:
    """The spans of ``session`` (docs/otel.md); ``content`` adds the opt-in message text.

    Pure and offline: the same session always gives the same spans and ids.
    """
    builder = _Builder(session, content)
    events = session.events
    drafts = builder.run(events)
    root = builder.root_span(session, events)
    spans = tuple(_freeze(builder.trace, d) for d in (root, *drafts))
    return OtelTrace(
        session_id=session.id,
        trace_id=builder.trace,
        spans=spans,
        turns=builder.counts["turn"],
        model_calls=builder.counts["chat"],
        tool_calls=builder.counts["tool"],
    )


def _freeze(trace: int, draft: _Draft) -> OtelSpan:
    name = draft.name
    if name == sc.OP_CHAT:
        model = draft.attributes.get(sc.GEN_AI_REQUEST_MODEL)
        name = f"{sc.OP_CHAT} {model}" if model else sc.OP_CHAT
    return OtelSpan(
        name=name,
        kind=draft.kind,
        trace_id=trace,
        span_id=draft.span_id,
        parent_id=draft.parent_id,
        start_ns=draft.start,
        end_ns=draft.end if draft.end is not None else draft.start,
        attributes=dict(draft.attributes),
        events=tuple(draft.events),
        error=draft.error,
        links=draft.links,
    )
