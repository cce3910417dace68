"""The report's views of requests: each request's header parts and messages.

Everything shown comes from the log: each request is what
:func:`tapelog.request.walk_requests` (the loop's own code path) says it
contained. All log text is escaped here; long texts are clipped with a visible
note (never silently), and a request that extends the one before shows only
its new messages, so the page grows with the log rather than with its square.
The static report shows every request; ``tapelog serve`` shows a window of
them with the same function (``before`` and ``seen`` carry what the requests
before the window decide). The timeline is in ``_report_timeline``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

from tapelog.audit._diff import tool_marks
from tapelog.audit._report_links import ReportLinks
from tapelog.log._api import EpochHeader, Event, encode_str, system_lines
from tapelog.request import LlmRequest

__all__ = [
    "ShownRequest",
    "clip",
    "content_text",
    "excerpt",
    "header_change",
    "header_keys",
    "message_html",
    "requests_html",
]

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


def excerpt(text: str) -> str:
    """``text`` on one line, cut to 160 characters (for summaries and timeline lines)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= _EXCERPT else flat[: _EXCERPT - 1] + "…"


def content_text(content: Any) -> str:
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
            parts.append(content_text(block.get("content")))
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


def message_html(
    position: int,
    seq: int | None,
    message: Mapping[str, Any],
    limit: int,
    links: ReportLinks | None = None,
) -> str:
    """One message of a request: role, where it comes from (linked), excerpt, blocks."""
    role = str(message.get("role"))
    where = "session prefix"
    if seq is not None:
        where = f"seq {seq}" if links is None else f'<a href="{links.seq(seq)}">seq {seq}</a>'
    summary = escape(excerpt(content_text(message.get("content"))))
    blocks = "".join(_block_html(b, limit) for b in message.get("content") or ())
    return (
        f'<details class="msg role-{escape(role)}" open><summary><span class="pos">'
        f'{position}</span> <b>{escape(role)}</b> <span class="seq">{where}</span> '
        f'<span class="excerpt">{summary}</span></summary>{blocks}</details>'
    )


def header_keys(header: EpochHeader) -> tuple[str, str]:
    """What makes two requests' system prompt (first) or tools (second) the same."""
    return "s" + "\n".join(system_lines(header.system)), "t" + encode_str(list(header.tools))


def _part(
    title: str, body: str, seen: dict[str, int], key: str, index: int, links: ReportLinks
) -> str:
    """A collapsible header part, shown in full only where it first appears."""
    first = seen.setdefault(key, index)
    if first != index:
        return (
            f'<p class="same">{escape(title)}: same as in '
            f'<a href="{links.request(first)}">request #{first}</a>.</p>'
        )
    return f'<details class="part"><summary>{escape(title)}</summary>{body}</details>'


def _shared(prev: LlmRequest | None, new: LlmRequest) -> int:
    """How many leading messages ``new`` shares with the request before it."""
    if prev is None:
        return 0
    n = len(prev.messages)
    if n > len(new.messages) or prev.node_seqs != new.node_seqs[:n]:
        return 0
    # list equality in C: an identity test for the shared frozen messages, then ==
    return n if prev.messages == new.messages[:n] else 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ShownRequest:
    """One request's section: the request rebuilt, and its summary lines (HTML)."""

    index: int
    request: LlmRequest
    summary: str
    """The section's one-line title (HTML)."""
    detail: str
    """Facts under the title: provider, rule, body size and sha256, ... (HTML)."""
    explained: str = ""
    """Links to the events that explain what changed before it (HTML; may be empty)."""


def requests_html(
    shown: Sequence[ShownRequest],
    limit: int,
    links: ReportLinks,
    *,
    before: tuple[int, LlmRequest] | None = None,
    seen: dict[str, int] | None = None,
) -> str:
    """One collapsible section per request: header parts, then its messages.

    ``before`` is the request just before the first one shown (its index and
    request), ``seen`` where each system prompt and tool list first appeared
    (:func:`header_keys`); both only matter when ``shown`` starts after request 1.
    """
    seen = {} if seen is None else seen
    out: list[str] = []
    for item in shown:
        header = item.request.header
        system_key, tools_key = header_keys(header)
        parts = [f'<div class="meta">{item.detail}</div>']
        if item.explained:
            parts.append(f'<div class="meta">{item.explained}</div>')
        actions = links.request_actions(item.index)
        if actions:
            parts.append(f'<div class="actions">{actions}</div>')
        system = "\n".join(system_lines(header.system))
        title = f"System prompt ({len(system):,} chars)"
        body = f"<pre>{escape(clip(system, limit))}</pre>"
        parts.append(_part(title, body, seen, system_key, item.index, links))
        tools = "".join(
            f'<details class="tool"><summary><b>{escape(str(t["name"]))}</b> '
            f'<span class="excerpt">{escape(excerpt(str(t.get("description", ""))))}</span>'
            f"</summary><pre>{escape(clip(encode_str(t), limit))}</pre></details>"
            for t in header.tools
        )
        names = ", ".join(str(t["name"]) for t in header.tools) or "none"
        title = f"Tools ({len(header.tools)}): {names}"
        parts.append(_part(title, tools, seen, tools_key, item.index, links))
        shared = _shared(before[1] if before else None, item.request)
        if before is not None:
            prev = f'<a href="{links.request(before[0])}">request #{before[0]}</a>'
            if shared:
                parts.append(
                    f'<p class="same">Messages 1–{shared}: the same as in {prev} '
                    f"(this request extends it).</p>"
                )
            else:
                parts.append(
                    f'<p class="same warn">Does not extend {prev}: every message is shown.</p>'
                )
        seqs, messages = item.request.node_seqs, item.request.messages
        if len(seqs) != len(messages):
            raise ValueError("a request's node seqs and messages differ in length")
        # Only the messages after the shared ones: a long history is not walked again.
        for i in range(shared, len(messages)):
            parts.append(message_html(i + 1, seqs[i], messages[i], limit, links))
        out.append(
            f'<details class="request" id="req-{item.index}"><summary>{item.summary}'
            f'</summary><div class="request-body">{"".join(parts)}</div></details>'
        )
        before = (item.index, item.request)
    return "".join(out) or '<p class="empty">No loop requests in this session.</p>'
