"""``render_report``: one self-contained HTML page that explains a session's cache use.

The page is for a person holding a log and a question ("why did request 7 miss
the cache?"): a header with the totals, a chart with one bar per loop request
(cached vs not, breaks marked with their cause), the turn/step timeline, and
every request as rebuilt by the loop's own code path. It needs no network: CSS,
script and chart are inline, so it can be mailed, archived or opened offline.
The numbers and the causes come from :func:`tapelog.audit.cache_report` (the
same audit as ``tapelog cache``); the page only adds words and shapes.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from html import escape
from importlib import resources
from typing import Any

from tapelog.audit._cache_report import CacheCause, cache_report
from tapelog.audit._report_chart import Bar, chart_svg, legend_html
from tapelog.audit._report_views import requests_html, timeline_html
from tapelog.llm import encode_request
from tapelog.log import Session, encode
from tapelog.request import RebuiltRequest, rebuild_requests

__all__ = ["render_report"]

_CAUSE_TEXT = {
    "header-delta": "header delta (system, tools or config changed)",
    "header-fallback": "header fallback snapshot",
    "resume-drift": "resume with a different header",
    "client-edit": "the client sent an earlier message differently",
    "compaction": "compaction rewrote the history",
    "trim": "tool results trimmed",
    "new-process": "a new process: the provider's cache lives in the process and starts empty",
    "idle-gap": "idle longer than the provider keeps a cached prefix",
    "unexplained": "unexplained (the log shows no reason)",
}


def _cause_text(cause: CacheCause) -> str:
    """The cause's own label, plus the reason when the log explains nothing."""
    reason = cause.detail.get("reason") if cause.kind == "unexplained" else None
    return f"{cause.label}: {reason}" if reason else cause.label


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.0f}%"


def _summary(request: Mapping[str, Any], labels: Sequence[str]) -> str:
    prompt, cached = request["prompt_tokens"], request["cached_reported"]
    ratio = f" ({100 * cached / prompt:.0f}%)" if prompt else ""
    causes = "".join(
        f' <span class="cause cause-{escape(c["kind"])}">{escape(label)}</span>'
        for c, label in zip(request["causes"], labels, strict=True)
    )
    return (
        f'<span class="idx">#{request["index"]}</span> turn {request["turn"]} · '
        f"step {request['step']} · {prompt:,} prompt tok · {cached:,} cached{ratio}{causes}"
    )


def _detail(item: RebuiltRequest, request: Mapping[str, Any]) -> str:
    body = encode_request(item.request)
    return escape(
        f"{request['provider']} / {request['model']} · cache rule {request['rule']} · "
        f"boundary seq {item.boundary_seq} · {len(item.request.messages)} messages · "
        f"body {len(body):,} bytes, sha256 {hashlib.sha256(body).hexdigest()} · "
        f"expected cached {request['cached_expected']:,} tok · "
        f"prefix shared with earlier requests {request['shared_prefix_tokens']:,} tok"
    )


def _seqs_note(seqs: Sequence[int]) -> str:
    """`` (seq 7)`` / `` (seqs 7, 9)`` after a cause; nothing when no event explains it."""
    if not seqs:
        return ""
    noun = "seq" if len(seqs) == 1 else "seqs"
    return f" ({noun} {', '.join(str(s) for s in seqs)})"


def _breaks_table(
    requests: Sequence[Mapping[str, Any]],
    labels: Sequence[list[str]],
    sentences: Sequence[list[str]],
) -> str:
    rows = []
    for request, names, said in zip(requests, labels, sentences, strict=True):
        if not request["drop"] and not request["causes"]:
            continue
        causes = "; ".join(
            label + _seqs_note(c.get("seqs", ()))
            for c, label in zip(request["causes"], names, strict=True)
        )
        rows.append(
            f'<tr><td><a href="#req-{request["index"]}">#{request["index"]}</a></td>'
            f"<td>{request['turn']}.{request['step']}</td>"
            f'<td class="num">{request["prompt_tokens"]:,}</td>'
            f'<td class="num">{request["cached_reported"]:,}</td>'
            f'<td class="num">{request["cached_expected"]:,}</td>'
            f"<td>{escape(causes or 'none')}</td>"
            f'<td class="why">{"".join(f"<div>{escape(s)}</div>" for s in said)}</td></tr>'
        )
    if not rows:
        return '<p class="empty">No cache breaks: every request reused the one before.</p>'
    head = "".join(
        f"<th>{h}</th>"
        for h in ("request", "turn.step", "prompt", "cached", "expected", "cause", "what happened")
    )
    body = "".join(rows)
    return f'<table class="breaks"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _header(session: Session, report: Mapping[str, Any]) -> str:
    totals = report["totals"]
    models = dict.fromkeys(f"{r['provider']} / {r['model']}" for r in report["requests"])
    created = datetime.fromtimestamp(session.info.created / 1000, UTC)
    turns = sum(1 for e in session.events if e.type == "turn/start")
    turn_word = "turn" if turns == 1 else "turns"
    facts = [
        ("requests", f"{totals['requests']:,}"),
        ("prompt tokens", f"{totals['prompt_tokens']:,}"),
        ("cached tokens", f"{totals['cached_reported']:,}"),
        ("hit ratio", _pct(totals.get("hit_ratio"))),
        ("cache efficiency", _pct(totals.get("efficiency"))),
    ]
    cards = "".join(
        f'<div class="card"><div class="value">{escape(v)}</div>'
        f'<div class="name">{escape(k)}</div></div>'
        for k, v in facts
    )
    return (
        f'<h1>Session <code>{escape(session.id)}</code></h1><p class="sub">'
        f"{escape(', '.join(models) or 'no requests')} · {turns} {turn_word} · "
        f"{len(session.events):,} events · created {created:%Y-%m-%d %H:%M} UTC</p>"
        f'<div class="cards">{cards}</div>'
    )


def _script_json(value: Any) -> str:
    """JSON safe inside ``<script>``: every ``<`` escaped, so no ``</script>`` or ``<!--``."""
    return encode(value).decode("utf-8").replace("<", "\\u003c")


def render_report(session: Session, *, text_limit: int = 4000) -> str:
    """The HTML report of ``session``, as one self-contained page.

    ``text_limit`` caps each text shown in the message view (a note says how
    much was cut); every request is always shown.
    """
    events = session.events
    rebuilt = rebuild_requests(events, session_id=session.id)
    audit = cache_report(session)
    if [r.index for r in audit.requests] != [r.index for r in rebuilt]:
        raise AssertionError("the cache audit and the rebuild disagree on the loop requests")
    report = audit.to_json()
    requests = report["requests"]
    labels = [[_cause_text(c) for c in row.causes] for row in audit.requests]
    bars = [
        Bar(
            index=row.index,
            turn=row.turn,
            step=row.step,
            prompt=row.prompt_tokens,
            cached=row.cached_reported,
            expected=row.cached_expected if row.usage_logged else None,
            breaks=tuple((c.kind, c.label) for c in row.causes),
        )
        for row in audit.requests
    ]
    kinds = {c.kind: _CAUSE_TEXT.get(c.kind, c.kind) for r in audit.requests for c in r.causes}
    slots = {
        "title": escape(f"tapelog report · {session.id}"),
        "header": _header(session, report),
        "chart": chart_svg(bars),
        "legend": legend_html(kinds, any(b.expected not in (None, b.cached) for b in bars)),
        "breaks": _breaks_table(
            requests, labels, [[c.sentence for c in row.causes] for row in audit.requests]
        ),
        "timeline": timeline_html(events, {r.boundary_seq: r.index for r in rebuilt}),
        "requests": requests_html(
            rebuilt,
            [_summary(r, names) for r, names in zip(requests, labels, strict=True)],
            [_detail(item, r) for item, r in zip(rebuilt, requests, strict=True)],
            text_limit,
        ),
        "data": _script_json(report),
    }
    template = resources.files("tapelog.audit").joinpath("report_template.html")
    # One pass: text inserted into a slot is never scanned for slots again.
    return re.sub(r"\{\{(\w+)\}\}", lambda m: slots[m.group(1)], template.read_text("utf-8"))
