"""The report's timeline: turns, their steps and what happened in each, one event at a time.

:class:`Timeline` is fed the log's events in order and keeps the page's tree
(turns holding steps and notes, steps holding items). :meth:`Timeline.html`
is the static report's timeline; :meth:`Timeline.feed` also returns what each
event changed as small operations (a new turn, a new step, an item, a step's
token line, a turn's end), which ``tapelog serve`` sends to an open page so its
script can apply them to the same tree without reloading. One builder, so the
live page and the report cannot show an event differently.

Every entry carries ``id="seq-N"`` (N the seq of the event it shows; a step
the seq of its ``step/start``, a turn of its ``turn/start``), the target of
every "explained by seq N" link. All log text is escaped here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from html import escape
from typing import Any

from tapelog.audit._report_links import ReportLinks
from tapelog.audit._report_views import content_text, excerpt, header_change
from tapelog.llm._api import usage_prompt_tokens
from tapelog.log._api import Event, chunk_kind
from tapelog.request._api import reading_seq

__all__ = ["Timeline"]

_OPEN = "open (no turn/end yet)"
_OUTSIDE = "outside turns"
_IN_PROGRESS = "in progress"


def _tokens(usage: Mapping[str, Any] | None) -> str:
    if not usage:
        return "no usage logged"
    prompt = usage_prompt_tokens(usage)
    return (
        f"{prompt:,} prompt tok · {usage.get('cache_read', 0):,} cached · "
        f"{usage.get('output', 0):,} out"
    )


def _item(seq: int, css: str, label: str, body: str) -> str:
    return f'<li class="{css}" id="seq-{seq}"><span class="tag">{escape(label)}</span> {body}</li>'


def _event_item(event: Event, calls: dict[str, str]) -> str | None:
    """The timeline line for one event (``None``: not shown on its own)."""
    kind, seq, data = event.type, event.seq, event.data
    if kind == "assistant/chunk":
        if chunk_kind(event) != "error":
            return None  # streamed pieces show in their message; only failed attempts stand out
        chunk = data["chunk"]
        text = f"{chunk.get('status')} {chunk.get('message')}"
        return _item(seq, "error", "retry", escape(text))
    if kind == "assistant/message":
        text = excerpt(content_text(data["content"])) or "(empty)"
        note = " · interrupted" if data.get("interrupted") else ""
        return _item(seq, "assistant", "assistant", f"{escape(text)}{note}")
    if kind == "tool/call":
        calls[data["call_id"]] = data["name"]
        return None
    if kind == "tool/approval":  # a person's (the approver's) decision, before the tool ran
        name = calls.get(data["call_id"], data["call_id"])
        verdict = "approved" if data["approved"] else "denied"
        why = f": {data['reason']}" if "reason" in data else ""
        text = escape(f"{name} {verdict} by {data['by']}{why}")
        return _item(seq, "tool" if data["approved"] else "tool error", "approval", text)
    if kind == "tool/result":
        name = calls.get(data["call_id"], data["call_id"])
        op = event.surface_op
        if isinstance(op, Mapping):
            text = f"result of {escape(name)} trimmed (replaces seq {op['start']})"
            return _item(seq, "trim", "trim", text)
        css = "tool error" if data["is_error"] else "tool"
        result = escape(excerpt(content_text(data["content"])))
        return _item(seq, css, name, f"→ <code>{result}</code>")
    if kind in ("user/message", "context/message"):
        source = data["source"].get("kind", "?")
        text = escape(excerpt(content_text(data["content"])))
        if source == "compaction":
            return _item(seq, "compaction", "summary", text)
        return _item(seq, f"context {kind[:4]}", source, text)
    if kind in ("request/header", "request/header-delta"):
        return _item(seq, "header", "header", escape(header_change(event)))
    if kind.startswith("compact/"):
        return _compaction_item(event)
    if kind == "session/end-seed":
        text = f"inherited seed from {data.get('parent')} ends"
        return _item(seq, "header", "fork", escape(text))
    if kind == "session/origin":
        return _item(seq, "header", "origin", escape(_origin_text(data)))
    return None


def _origin_text(data: Mapping[str, Any]) -> str:
    """Where a proxied session came from: the session it branched off, and the
    client's own id of the conversation."""
    parts = []
    if "parent" in data:
        why = f": {data['why']}" if data.get("why") else ""
        parts.append(f"branched from {data['parent']} at seq {data['parent_seq']}{why}")
    client = data.get("client")
    if client is not None:
        parts.append(f"client conversation {client['id']} ({client['signal']})")
    return " · ".join(parts)


def _compaction_item(event: Event) -> str | None:
    data, seq = event.data, event.seq
    if event.type == "compact/start":
        text = (
            f"{data.get('id')} starts ({data.get('trigger')}, "
            f"~{data.get('context_tokens', 0):,} tok)"
        )
        return _item(seq, "compaction", "compaction", escape(text))
    if event.type == "compact/summary":
        text = (
            f"{data.get('id')} summary by {data.get('provider')} / {data.get('model')}: "
            f"~{data.get('shadowed_tokens', 0):,} → ~{data.get('summary_tokens', 0):,} tok"
        )
        return _item(seq, "compaction", "compaction", escape(text))
    if data.get("ok", True):
        return _item(seq, "compaction", "compaction", escape(f"{data.get('id')} ends"))
    return _item(
        seq, "error", "compaction", escape(f"{data.get('id')} failed: {data.get('error')}")
    )


@dataclass(slots=True)
class _Step:
    seq: int
    head: str
    usage: str = _IN_PROGRESS
    items: list[str] = field(default_factory=list)

    def html(self) -> str:
        return (
            f'<li class="step" id="seq-{self.seq}"><div class="step-head">{self.head} · '
            f'<span class="usage">{escape(self.usage)}</span></div>'
            f'<ul class="items">{"".join(self.items)}</ul></li>'
        )


@dataclass(slots=True)
class _Turn:
    anchor: str
    head: str
    reason: str
    parts: list[str | _Step] = field(default_factory=list)

    def html(self) -> str:
        parts = "".join(p if isinstance(p, str) else p.html() for p in self.parts)
        return (
            f'<li class="turn"{self.anchor}><div class="turn-head">{self.head}'
            f'<span class="reason reason-{escape(self.reason)}">{escape(self.reason)}</span>'
            f'</div><ol class="steps">{parts}</ol></li>'
        )


Op = dict[str, str]
"""One change to the page's timeline: ``{"op": "turn" | "step" | "item" | "usage" |
"end", ...}`` (see :meth:`Timeline.feed`)."""


class Timeline:
    """The timeline of the events fed so far (see the module docstring).

    ``request_at(seq)`` gives the request index of the step starting at
    ``seq`` (``None``: it sent none); ``links`` says where its link points.
    """

    def __init__(
        self, request_at: Callable[[int], int | None], links: ReportLinks | None = None
    ) -> None:
        self._request_at = request_at
        self._links = links or ReportLinks()
        self._turns: list[_Turn] = []
        self._turn: _Turn | None = None
        self._step: _Step | None = None
        self._usage: Mapping[str, Any] | None = None
        self._calls: dict[str, str] = {}

    def feed(self, event: Event) -> list[Op]:
        """Add one event; the page operations it made, in order.

        ``turn``/``step`` carry the new element's ``html`` (a step goes into the
        last turn's ``ol.steps``); ``item`` its ``html`` and where it goes (``to``:
        the open ``step``'s ``ul.items`` or the last ``turn``'s ``ol.steps``);
        ``usage`` the open step's new token ``text``; ``end`` the last turn's ``reason``.
        """
        with reading_seq(event.seq):
            return self._feed(event)

    def _feed(self, event: Event) -> list[Op]:
        kind, data = event.type, event.data
        ops: list[Op] = []
        if kind == "turn/start":
            self._close_step(ops)
            if self._turn is not None:
                self._end_turn("no turn/end", ops)
            head = f'<b id="turn-{data["turn"]}">Turn {data["turn"]}</b> '
            self._open_turn(_Turn(f' id="seq-{event.seq}"', head, _OPEN), ops)
        elif kind == "turn/end":
            self._close_step(ops)
            if self._turn is None:
                self._open_turn(self._implicit(data.get("turn")), ops)
            self._end_turn(str(data["reason"].get("kind", "?")), ops)
        elif kind == "step/start":
            self._close_step(ops)
            if self._turn is None:
                self._open_turn(self._implicit(data.get("turn")), ops)
            assert self._turn is not None
            index = self._request_at(event.seq)
            link = ""
            if index:
                link = f' · <a href="{self._links.request(index)}">request #{index}</a>'
            self._step = _Step(event.seq, f"<b>Step {data['step']}</b>{link}")
            self._usage = None
            self._turn.parts.append(self._step)
            ops.append({"op": "step", "html": self._step.html()})
        elif kind == "step/end":
            self._close_step(ops)
        else:
            line = _event_item(event, self._calls)
            if line is not None:
                if self._step is not None:
                    self._step.items.append(line)
                    ops.append({"op": "item", "to": "step", "html": line})
                else:
                    if self._turn is None:
                        self._open_turn(self._implicit(None), ops)
                    assert self._turn is not None
                    self._turn.parts.append(line)
                    ops.append({"op": "item", "to": "turn", "html": line})
            if kind == "assistant/message" and self._step is not None:
                self._usage = data.get("usage")
                if self._usage:
                    self._step.usage = _tokens(self._usage)
                    ops.append({"op": "usage", "text": self._step.usage})
        return ops

    @staticmethod
    def _implicit(turn: Any) -> _Turn:
        """The holder of events outside any turn (or of a turn cut into several pages)."""
        head = f"<b>Turn {escape(str(turn))} (continued)</b> " if isinstance(turn, int) else ""
        return _Turn("", head, _OPEN if head else _OUTSIDE)

    def _open_turn(self, turn: _Turn, ops: list[Op]) -> None:
        self._turns.append(turn)
        self._turn = turn
        ops.append({"op": "turn", "html": turn.html()})

    def _end_turn(self, reason: str, ops: list[Op]) -> None:
        assert self._turn is not None
        self._turn.reason = reason
        self._turn = None
        ops.append({"op": "end", "reason": reason})

    def _close_step(self, ops: list[Op]) -> None:
        step = self._step
        if step is None:
            return
        if not self._usage:
            step.usage = _tokens(None)
            ops.append({"op": "usage", "text": step.usage})
        self._step = None

    def html(self) -> str:
        """The whole timeline so far (an open step says it is in progress)."""
        return f'<ol class="timeline">{"".join(t.html() for t in self._turns)}</ol>'
