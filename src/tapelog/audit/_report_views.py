"""The report's two long views: the turn/step timeline and each request's messages.

Everything shown comes from the log: the timeline walks the events once, the
request view shows what :func:`tapelog.audit.rebuild_requests` (the loop's own
code path) says each request contained. All log text is escaped here; long
texts are clipped with a visible note (never silently), and a request that
extends the one before shows only its new messages, so the page grows with the
log rather than with its square.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from tapelog.audit._diff import tool_marks
from tapelog.llm import usage_prompt_tokens
from tapelog.log import Event, chunk_kind, encode_str
from tapelog.request import RebuiltRequest, reading_seq

__all__ = ["clip", "header_change", "requests_html", "timeline_html"]

_EXCERPT = 160


def clip(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters (head and tail), saying how much was cut."""
    if len(text) <= limit:
        return text
    head, tail = limit * 3 // 4, limit // 4
    cut = len(text) - head - tail
    return (
        f"{text[:head]}\n[… {cut:,} characters not shown in this report; "
        f"`tapelog requests SESSION --out DIR` writes every body in full …]\n{text[-tail:]}"
    )


def _excerpt(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _EXCERPT else flat[: _EXCERPT - 1] + "…"


def _content_text(content: Any) -> str:
    """The readable text of a content value (a string or a list of blocks)."""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content or ():
        kind = block.get("type")
        if kind in ("text", "reasoning"):
            parts.append(block.get("text", ""))
        elif kind == "tool_call":
            parts.append(f"{block.get('name')}({block.get('arguments', '')})")
        elif kind == "tool_result":
            parts.append(_content_text(block.get("content")))
        else:
            parts.append(f"[{kind}]")
    return " ".join(p for p in parts if p)


def header_change(event: Event) -> str:
    """One phrase for a header event: ``snapshot (resume)``, ``tools +word_count``, …"""
    if event.type == "request/header":
        return f"header snapshot ({event.data['reason']})"
    fields: list[str] = []
    for key, value in event.data.items():
        if key == "tools":
            added = [t["name"] for t in value.get("add", ())]
            changed = [t["name"] for t in value.get("change", ())]
            fields.append("tools " + tool_marks(added, value.get("remove", ()), changed))
        else:
            fields.append(f"{key} changed")
    return ", ".join(fields)


# --- timeline ------------------------------------------------------------------


def _tokens(usage: Mapping[str, Any] | None) -> str:
    if not usage:
        return "no usage logged"
    prompt = usage_prompt_tokens(usage)
    return (
        f"{prompt:,} prompt tok · {usage.get('cache_read', 0):,} cached · "
        f"{usage.get('output', 0):,} out"
    )


def _item(css: str, label: str, body: str) -> str:
    return f'<li class="{css}"><span class="tag">{escape(label)}</span> {body}</li>'


def _event_item(event: Event, calls: dict[str, str]) -> str | None:
    """The timeline line for one event (``None``: not shown on its own)."""
    kind = event.type
    if kind == "assistant/chunk" and chunk_kind(event) != "error":
        return None  # streamed pieces show in their message; only failed attempts stand out
    data = event.data
    if kind == "assistant/message":
        text = _excerpt(_content_text(data["content"])) or "(empty)"
        note = " · interrupted" if data.get("interrupted") else ""
        return _item("assistant", "assistant", f"{escape(text)}{note}")
    if kind == "tool/call":
        calls[data["call_id"]] = data["name"]
        return None
    if kind == "tool/result":
        name = calls.get(data["call_id"], data["call_id"])
        op = event.surface_op
        if isinstance(op, Mapping):
            text = f"result of {escape(name)} trimmed (replaces seq {op['start']})"
            return _item("trim", "trim", text)
        css = "tool error" if data["is_error"] else "tool"
        result = escape(_excerpt(_content_text(data["content"])))
        return _item(css, name, f"→ <code>{result}</code>")
    if kind in ("user/message", "context/message"):
        source = data["source"].get("kind", "?")
        if source == "compaction":
            return _item("compaction", "summary", escape(_excerpt(_content_text(data["content"]))))
        return _item(
            f"context {kind[:4]}", source, escape(_excerpt(_content_text(data["content"])))
        )
    if kind in ("request/header", "request/header-delta"):
        return _item("header", "header", escape(header_change(event)))
    if kind == "compact/start":
        return _item(
            "compaction",
            "compaction",
            escape(
                f"{data.get('id')} starts "
                f"({data.get('trigger')}, ~{data.get('context_tokens', 0):,} tok)"
            ),
        )
    if kind == "compact/end" and not data.get("ok", True):
        return _item("error", "compaction", escape(f"{data.get('id')} failed: {data.get('error')}"))
    if kind == "assistant/chunk" and chunk_kind(event) == "error":
        chunk = data["chunk"]
        return _item("error", "retry", escape(f"{chunk.get('status')} {chunk.get('message')}"))
    if kind == "session/end-seed":
        return _item("header", "fork", escape(f"inherited seed from {data.get('parent')} ends"))
    return None


def timeline_html(events: Sequence[Event], request_at: Mapping[int, int]) -> str:
    """Turns, their steps and what happened in each, from one walk over the log.

    ``request_at`` maps each ``step/start`` seq to its request index.
    """
    out: list[str] = ['<ol class="timeline">']
    calls: dict[str, str] = {}
    turn_head = ""
    body: list[str] = []  # the open turn's children (steps and notes)
    step: list[str] | None = None  # the open step's lines
    step_head = ""
    usage: Mapping[str, Any] | None = None

    def close_step() -> None:
        nonlocal step
        if step is not None:
            body.append(
                f'<li class="step"><div class="step-head">{step_head} · '
                f'{escape(_tokens(usage))}</div><ul class="items">{"".join(step)}</ul></li>'
            )
            step = None

    def close_turn(reason: str) -> None:
        close_step()
        if turn_head or body:
            out.append(
                f'<li class="turn"><div class="turn-head">{turn_head}'
                f'<span class="reason reason-{escape(reason)}">{escape(reason)}</span>'
                f'</div><ol class="steps">{"".join(body)}</ol></li>'
            )
        body.clear()

    for event in events:
        with reading_seq(event.seq):
            data = event.data
            if event.type == "turn/start":
                close_turn("outside turns")
                turn_head = f'<b id="turn-{data["turn"]}">Turn {data["turn"]}</b> '
            elif event.type == "turn/end":
                close_turn(str(data["reason"].get("kind", "?")))
                turn_head = ""
            elif event.type == "step/start":
                close_step()
                index = request_at.get(event.seq)
                link = f' · <a href="#req-{index}">request #{index}</a>' if index else ""
                step_head, step, usage = f"<b>Step {data['step']}</b>{link}", [], None
            elif event.type == "step/end":
                close_step()
            else:
                if event.type == "assistant/message":
                    usage = data.get("usage")
                line = _event_item(event, calls)
                if line is not None:
                    (step if step is not None else body).append(line)
    close_turn("open (no turn/end yet)" if turn_head else "outside turns")
    out.append("</ol>")
    return "".join(out)


# --- requests -------------------------------------------------------------------


def _block_html(block: Mapping[str, Any], limit: int) -> str:
    kind = block.get("type")
    if kind == "text":
        return f'<pre class="text">{escape(clip(block["text"], limit))}</pre>'
    if kind == "reasoning":
        extra = " (with signature)" if block.get("signature") else ""
        text = clip(block.get("text", ""), limit)
        return (
            f'<div class="label">reasoning{extra}</div><pre class="reasoning">{escape(text)}</pre>'
        )
    if kind == "tool_call":
        args = escape(clip(str(block.get("arguments", "")), limit))
        return (
            f'<div class="label">tool call <b>{escape(str(block.get("name")))}</b> '
            f'<span class="id">{escape(str(block.get("id")))}</span></div><pre>{args}</pre>'
        )
    if kind == "tool_result":
        error = ' <span class="err">error</span>' if block.get("is_error") else ""
        content = block.get("content")
        inner = (
            f"<pre>{escape(clip(content, limit))}</pre>"
            if isinstance(content, str)
            else "".join(_block_html(b, limit) for b in content or ())
        )
        return (
            f'<div class="label">tool result for <span class="id">'
            f"{escape(str(block.get('tool_call_id')))}</span>{error}</div>{inner}"
        )
    if kind == "image":
        size = f"{len(block.get('data', '')):,} base64 chars" if "data" in block else "by URL"
        return f'<div class="label">image {escape(str(block.get("media_type", "")))} ({size})</div>'
    return f"<pre>{escape(clip(encode_str(block), limit))}</pre>"


def _message_html(position: int, seq: int | None, message: Mapping[str, Any], limit: int) -> str:
    role = str(message.get("role"))
    where = f"seq {seq}" if seq is not None else "session prefix"
    summary = escape(_excerpt(_content_text(message.get("content"))))
    blocks = "".join(_block_html(b, limit) for b in message.get("content") or ())
    return (
        f'<details class="msg role-{escape(role)}" open><summary><span class="pos">'
        f'{position}</span> <b>{escape(role)}</b> <span class="seq">{where}</span> '
        f'<span class="excerpt">{summary}</span></summary>{blocks}</details>'
    )


def _part(title: str, body: str, seen: dict[str, int], key: str, index: int) -> str:
    """A collapsible header part, shown in full only where it first appears."""
    first = seen.setdefault(key, index)
    if first != index:
        return (
            f'<p class="same">{escape(title)}: same as in '
            f'<a href="#req-{first}">request #{first}</a>.</p>'
        )
    return f'<details class="part"><summary>{escape(title)}</summary>{body}</details>'


def _shared(prev: RebuiltRequest | None, item: RebuiltRequest) -> int:
    """How many leading messages ``item`` shares with the request before it."""
    if prev is None:
        return 0
    old, new = prev.request, item.request
    n = len(old.messages)
    if n > len(new.messages) or old.node_seqs != new.node_seqs[:n]:
        return 0
    return n if all(a == b for a, b in zip(old.messages, new.messages, strict=False)) else 0


def requests_html(
    rebuilt: Sequence[RebuiltRequest],
    summaries: Sequence[str],
    details: Sequence[str],
    limit: int,
) -> str:
    """One collapsible section per request: header parts, then its messages."""
    seen: dict[str, int] = {}
    out: list[str] = []
    prev: RebuiltRequest | None = None
    for item, summary, detail in zip(rebuilt, summaries, details, strict=True):
        header = item.request.header
        parts = [f'<div class="meta">{detail}</div>']
        system = header.system or ""
        parts.append(
            _part(
                f"System prompt ({len(system):,} chars)",
                f"<pre>{escape(clip(system, limit))}</pre>",
                seen,
                "s" + system,
                item.index,
            )
        )
        tools = "".join(
            f'<details class="tool"><summary><b>{escape(str(t["name"]))}</b> '
            f'<span class="excerpt">{escape(_excerpt(str(t.get("description", ""))))}</span>'
            f"</summary><pre>{escape(clip(encode_str(t), limit))}</pre></details>"
            for t in header.tools
        )
        names = ", ".join(str(t["name"]) for t in header.tools) or "none"
        tools_key = "t" + encode_str(list(header.tools))
        parts.append(
            _part(f"Tools ({len(header.tools)}): {names}", tools, seen, tools_key, item.index)
        )
        shared = _shared(prev, item)
        if shared and prev is not None:
            parts.append(
                f'<p class="same">Messages 1–{shared}: the same as in '
                f'<a href="#req-{prev.index}">request #{prev.index}</a> '
                f"(this request extends it).</p>"
            )
        elif prev is not None:
            parts.append(
                f'<p class="same warn">Does not extend <a href="#req-{prev.index}">'
                f"request #{prev.index}</a>: every message is shown.</p>"
            )
        pairs = zip(item.request.node_seqs, item.request.messages, strict=True)
        for position, (seq, message) in enumerate(pairs, start=1):
            if position > shared:
                parts.append(_message_html(position, seq, message, limit))
        out.append(
            f'<details class="request" id="req-{item.index}"><summary>{summary}'
            f'</summary><div class="request-body">{"".join(parts)}</div></details>'
        )
        prev = item
    return "".join(out) or '<p class="empty">No loop requests in this session.</p>'
