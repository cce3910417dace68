"""The request diff page: any two loop requests side by side, and why they differ.

The comparison is :func:`tapelog.audit.request_diff`, the same as ``tapelog
diff`` (header field by field, tools by name, the system prompt by line, the
history's common prefix, replacements, appends and a client's edits), with the
seqs of the events that explain each part linked to the session's timeline.
The messages that differ are shown with the report's message view; each
request's exact body can be downloaded.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from html import escape
from typing import Any, Final

from tapelog.audit import RequestDiff, encode_request, request_diff
from tapelog.audit._api import (
    HeaderDiff,
    ReportWindow,
    edit_sentence,
    header_sentence,
    message_html,
)
from tapelog.log import encode
from tapelog.request import LlmRequest
from tapelog.serve._live import LiveSession
from tapelog.serve._session_page import ServeLinks

__all__ = ["diff_html"]

_NOWHERE: Final = ReportWindow(first=0, last=-1, first_seq=0, end_seq=0)
_VALUE_CHARS: Final = 200
_SHOWN: Final = 200
_TEXT_LIMIT: Final = 4000


def _value(value: Any) -> str:
    text = "(unset)" if value is None else encode(value).decode("utf-8")
    return escape(text if len(text) <= _VALUE_CHARS else text[: _VALUE_CHARS - 1] + "…")


def _seqs(seqs: Sequence[int], links: ServeLinks) -> str:
    if not seqs:
        return "no event"
    noun = "seq" if len(seqs) == 1 else "seqs"
    return noun + " " + ", ".join(f'<a href="{links.seq(s)}">{s}</a>' for s in seqs)


def _system_rows(lines: Sequence[str]) -> str:
    """The unified diff of the system prompt as a two-column table."""
    rows: list[str] = []
    removed: list[str] = []
    added: list[str] = []

    def flush() -> None:
        for i in range(max(len(removed), len(added))):
            old = removed[i] if i < len(removed) else None
            new = added[i] if i < len(added) else None
            rows.append(
                (
                    f'<tr><td class="del"><pre>{escape(old)}</pre></td>'
                    if old is not None
                    else "<tr><td></td>"
                )
                + (
                    f'<td class="add"><pre>{escape(new)}</pre></td></tr>'
                    if new is not None
                    else "<td></td></tr>"
                )
            )
        removed.clear()
        added.clear()

    for line in lines[2:]:
        mark, text = line[:1], line[1:]
        if mark == "-":
            removed.append(text)
        elif mark == "+":
            added.append(text)
        else:
            flush()
            if line.startswith("@@"):
                rows.append(f'<tr><th colspan="2">{escape(line)}</th></tr>')
            else:
                cell = f"<td><pre>{escape(text)}</pre></td>"
                rows.append(f"<tr>{cell}{cell}</tr>")
    flush()
    return (
        '<table class="diff"><thead><tr><th>request A</th><th>request B</th></tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _tools_table(names: tuple[list[str], list[str]], header: HeaderDiff) -> str:
    """Both requests' tools by name, side by side, added and removed ones marked."""
    rows = []
    old, new = names
    for i in range(max(len(old), len(new))):
        cells = []
        for side, marked, css in (
            (old, header.tools_removed, "del"),
            (new, header.tools_added, "add"),
        ):
            if i >= len(side):
                cells.append("<td></td>")
                continue
            name = side[i]
            changed = " ~" if name in header.tools_changed else ""
            cls = f' class="{css}"' if name in marked else ""
            cells.append(f"<td{cls}><code>{escape(name)}</code>{changed}</td>")
        rows.append(f'<tr><td class="num">{i + 1}</td>{"".join(cells)}</tr>')
    return (
        '<table class="diff tools"><thead><tr><th>#</th><th>request A</th><th>request B</th>'
        f"</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _header_section(
    diff: RequestDiff, links: ServeLinks, names: tuple[list[str], list[str]]
) -> str:
    header = diff.header
    explained = f"<p>Explained by {_seqs(diff.header_seqs, links)}.</p>"
    if header.empty:
        return f"<h2>Header</h2><p>The same in both requests.</p>{explained}"
    out = ["<h2>Header</h2>", explained]
    if header.config:
        rows = "".join(
            f"<tr><td><code>config.{escape(k)}</code></td><td>{_value(old)}</td>"
            f"<td>{_value(new)}</td></tr>"
            for k, (old, new) in header.config.items()
        )
        out.append(
            '<table class="diff"><thead><tr><th>field</th><th>request A</th>'
            f"<th>request B</th></tr></thead><tbody>{rows}</tbody></table>"
        )
    tools = []
    for name in header.tools_added:
        where = (
            "at the end" if header.tools_at_end else f"at position {header.tools_added_at[name]}"
        )
        tools.append(f'<li class="added">+ <b>{escape(name)}</b> added ({where})</li>')
    tools += [
        f'<li class="removed">− <b>{escape(n)}</b> removed</li>' for n in header.tools_removed
    ]
    for name in header.tools_changed:
        keys = ", ".join(header.tools_changed_keys.get(name, ()))
        tools.append(f"<li>~ <b>{escape(name)}</b> changed ({escape(keys or 'schema')})</li>")
    if header.tools_reordered:
        tools.append("<li>the tools were reordered</li>")
    if tools:
        out.append(f'<h3>Tools</h3><ul class="tools">{"".join(tools)}</ul>')
        out.append(_tools_table(names, header))
    if header.system:
        out.append(f"<h3>System prompt ({header.system_changed})</h3>")
        out.append(_system_rows(header.system))
    if header.prefix is not None:
        out.append(f"<p>Session prefix: {header.prefix[0]} → {header.prefix[1]} message(s).</p>")
    words = header_sentence({**header.to_json(), "system_lines": header.system_lines})
    out.append(f'<p class="note">In short: {escape(words)}.</p>')
    return "".join(out)


def _messages_section(diff: RequestDiff, links: ServeLinks) -> str:
    m = diff.messages
    out = [
        "<h2>Messages</h2>",
        f"<p>Request A sends {diff.a.messages} message(s), request B {diff.b.messages}; "
        f"the first {m.common} history message(s) are the same. "
        f"Explained by {_seqs(diff.message_seqs, links)}.</p><ul>",
    ]
    for r in m.replaced:
        out.append(
            f'<li>replaced ({escape(r.kind)}) by <a href="{links.seq(r.by)}">seq {r.by}</a>: '
            f"{_seqs(r.replaced, links)}</li>"
        )
    if m.appended:
        out.append(f'<li class="added">appended: {_seqs(m.appended, links)}</li>')
    if m.dropped:
        out.append(f'<li class="removed">no longer sent: {_seqs(m.dropped, links)}</li>')
    out.extend(f"<li>{escape(edit_sentence(e.to_json()))}</li>" for e in m.edits)
    if m.edits_total > len(m.edits):
        out.append(f"<li>… {m.edits_total - len(m.edits)} more edited message(s)</li>")
    if not (m.replaced or m.appended or m.dropped):
        out.append("<li>the history is the same</li>")
    out.append("</ul>")
    return "".join(out)


def _column(title: str, request: LlmRequest, start: int, links: ServeLinks) -> str:
    pairs = list(enumerate(zip(request.node_seqs, request.messages, strict=True), start=1))
    shown = pairs[start : start + _SHOWN]
    body = "".join(message_html(p, seq, msg, _TEXT_LIMIT, links) for p, (seq, msg) in shown)
    more = len(pairs) - start - len(shown)
    if more > 0:
        body += f'<p class="note">… {more} more message(s) not shown.</p>'
    if not shown:
        body = '<p class="empty">Nothing after the common messages.</p>'
    return f"<div><h3>{escape(title)}</h3>{body}</div>"


def diff_html(live: LiveSession, a: int, b: int) -> str:
    """The body of the diff page of requests ``a`` and ``b`` (``LogError``: no such request)."""
    session = live.session
    diff = request_diff(session, a, b)
    walked = live.walked()
    links = ServeLinks(live.id, _NOWHERE, count=len(walked))
    requests = {n: walked[n - 1].request() for n in (a, b)}
    base = f"/s/{escape(live.id)}"
    rows = []
    for label, cells in (
        ("turn.step", [f"{r.turn}.{r.step}" for r in (diff.a, diff.b)]),
        ("step/start", [f'<a href="{links.seq(r.seq)}">seq {r.seq}</a>' for r in (diff.a, diff.b)]),
        ("provider / model", [escape(f"{r.provider} / {r.model}") for r in (diff.a, diff.b)]),
        ("messages", [str(r.messages) for r in (diff.a, diff.b)]),
    ):
        rows.append(f"<tr><th>{label}</th><td>{cells[0]}</td><td>{cells[1]}</td></tr>")
    bodies = []
    for n in (a, b):
        body = encode_request(requests[n])
        bodies.append(
            f"{len(body):,} bytes, sha256 <code>{hashlib.sha256(body).hexdigest()}</code> · "
            f'<a href="{base}/requests/{n}.json" download>download</a>'
        )
    rows.append(f"<tr><th>body</th><td>{bodies[0]}</td><td>{bodies[1]}</td></tr>")
    heads = "".join(f'<th><a href="{links.request(n)}">request #{n}</a></th>' for n in (a, b))
    overview = (
        f'<table class="diff"><thead><tr><th></th>{heads}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )
    tool_names = (
        [str(t["name"]) for t in requests[a].header.tools],
        [str(t["name"]) for t in requests[b].header.tools],
    )
    start_a = start_b = 0
    if diff.header.prefix is None:
        start_a = len(requests[a].header.prefix) + diff.messages.common
        start_b = len(requests[b].header.prefix) + diff.messages.common
    side = (
        '<h2>Messages that differ</h2><div class="side">'
        + _column(f"request #{a}", requests[a], start_a, links)
        + _column(f"request #{b}", requests[b], start_b, links)
        + "</div>"
    )
    return (
        _diff_nav(live.id, a, b, len(walked))
        + f"<h1>Session <code>{escape(live.id)}</code>: request #{a} → request #{b}</h1>"
        + overview
        + _header_section(diff, links, tool_names)
        + _messages_section(diff, links)
        + side
    )


def _diff_nav(session_id: str, a: int, b: int, count: int) -> str:
    base = f"/s/{escape(session_id)}"
    return (
        f'<nav class="top"><a href="/">← all sessions</a><a href="{base}">session page</a>'
        f'<form method="get" action="{base}/diff">compare request '
        f'<input type="number" name="a" min="1" max="{count}" value="{a}"> with '
        f'<input type="number" name="b" min="1" max="{count}" value="{b}"> '
        '<button type="submit">diff</button></form></nav>'
    )
