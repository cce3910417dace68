"""``render_report``: one self-contained HTML page that explains a session's cache use.

The page is for a person holding a log and a question ("why did request 7 miss
the cache?"): a header with the totals, a chart with one bar per loop request
(cached vs not, breaks marked with their cause), the turn/step timeline, and
every request as rebuilt by the loop's own code path. It needs no network: CSS,
script and chart are inline, so it can be mailed, archived or opened offline.
The numbers come from :func:`tapelog.audit.cache_report`; the page only adds
words and shapes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from html import escape
from importlib import resources
from typing import Any

from tapelog.audit._rebuild import RebuiltRequest, encode_request, rebuild_requests
from tapelog.audit._report_chart import Bar, chart_svg, legend_html
from tapelog.audit._report_views import header_change, requests_html, timeline_html
from tapelog.log import Event, Session, canonical_header, digest, encode

__all__ = ["render_report"]

CAUSE_TEXT = {
    "header-delta": "header delta (system, tools or config changed)",
    "header-fallback": "header fallback snapshot",
    "resume-drift": "resume with a different header",
    "compaction": "compaction rewrote the history",
    "trim": "tool results trimmed",
    "unexplained": "unexplained (the log shows no reason)",
}


def _usage_by_step(events: Sequence[Event]) -> dict[tuple[int, int], Mapping[str, Any]]:
    out: dict[tuple[int, int], Mapping[str, Any]] = {}
    for event in events:
        if event.type == "assistant/message" and event.data.get("usage"):
            out[event.data["turn"], event.data["step"]] = event.data["usage"]
    return out


def _cache_json(session: Session, rebuilt: Sequence[RebuiltRequest]) -> dict[str, Any]:
    """The cache report's JSON for ``session`` (interim: usage and header events only)."""
    events = session.events
    usage = _usage_by_step(events)
    requests: list[dict[str, Any]] = []
    previous: RebuiltRequest | None = None
    for item in rebuilt:
        u = usage.get((item.turn, item.step), {})
        prompt = u.get("input", 0) + u.get("cache_read", 0) + u.get("cache_write", 0)
        causes: list[dict[str, Any]] = []
        for seq in item.header_seqs:
            event = events[seq]
            reason = event.data.get("reason")
            if event.type == "request/header-delta":
                causes.append({"kind": "header-delta", "seqs": [seq], "detail": {}})
            elif reason == "fallback":
                causes.append({"kind": "header-fallback", "seqs": [seq], "detail": {}})
            elif reason == "resume" and previous is not None:
                before = canonical_header(previous.request.header)
                if before != canonical_header(item.request.header):
                    causes.append({"kind": "resume-drift", "seqs": [seq], "detail": {}})
        start = previous.boundary_seq if previous is not None else 0
        between = events[start : item.boundary_seq]
        trims = [e.seq for e in between if e.type == "tool/result" and e.surface_op != "append"]
        summaries = [e.seq for e in between if e.type == "compact/summary"]
        if summaries:
            causes.append({"kind": "compaction", "seqs": summaries, "detail": {}})
        if trims:
            causes.append({"kind": "trim", "seqs": trims, "detail": {}})
        cached = u.get("cache_read", 0)
        drop = bool(causes) or (bool(requests) and cached < requests[-1]["cached_reported"])
        if drop and not causes:
            causes.append({"kind": "unexplained", "seqs": [], "detail": {}})
        config = item.request.config
        requests.append(
            {
                "index": item.index,
                "turn": item.turn,
                "step": item.step,
                "seq": item.boundary_seq,
                "provider": config.provider,
                "model": config.model,
                "rule": None,
                "prompt_tokens": prompt,
                "cached_reported": cached,
                "cached_expected": None,
                "shared_prefix_tokens": None,
                "drop": drop,
                "causes": causes,
            }
        )
        previous = item
    prompt_total = sum(r["prompt_tokens"] for r in requests)
    cached_total = sum(r["cached_reported"] for r in requests)
    totals = {
        "requests": len(requests),
        "prompt_tokens": prompt_total,
        "cached_reported": cached_total,
        "cached_expected": None,
        "hit_ratio": cached_total / prompt_total if prompt_total else None,
        "efficiency": None,
    }
    return {"session": session.id, "requests": requests, "totals": totals}


def cause_label(cause: Mapping[str, Any], events: Sequence[Event]) -> str:
    """A short label for a cache-break cause, read from the events it names."""
    kind = str(cause.get("kind"))
    named = [events[s] for s in cause.get("seqs", ()) if isinstance(s, int) and s < len(events)]
    if kind == "header-delta":
        changes = [header_change(e) for e in named if e.type == "request/header-delta"]
        return "; ".join(changes) or "header changed"
    if kind == "header-fallback":
        return "header fallback"
    if kind == "resume-drift":
        return "resume"
    if kind == "compaction":
        ids = {str(e.data["id"]) for e in named if "id" in e.data}
        ids |= {str(e.data["source"]["id"]) for e in named if "id" in e.data.get("source", {})}
        return " ".join(["compaction", *sorted(ids)])
    if kind == "trim":
        return f"trim ×{len(named) or len(cause.get('seqs', ()))}"
    return kind


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
    expected = request.get("cached_expected")
    shown = "n/a" if expected is None else f"{expected:,}"
    return escape(
        f"{request['provider']} / {request['model']} · boundary seq {item.boundary_seq} · "
        f"{len(item.request.messages)} messages · body {len(body):,} bytes, "
        f"{digest(body.decode('utf-8'))[:23]}… · cache the log allowed: {shown} tok"
    )


def _breaks_table(requests: Sequence[Mapping[str, Any]], labels: Sequence[list[str]]) -> str:
    rows = []
    for request, names in zip(requests, labels, strict=True):
        if not request["drop"] and not request["causes"]:
            continue
        causes = "; ".join(
            f"{label} (seq {', '.join(str(s) for s in c.get('seqs', ())) or '-'})"
            for c, label in zip(request["causes"], names, strict=True)
        )
        expected = request.get("cached_expected")
        rows.append(
            f'<tr><td><a href="#req-{request["index"]}">#{request["index"]}</a></td>'
            f"<td>{request['turn']}.{request['step']}</td>"
            f'<td class="num">{request["prompt_tokens"]:,}</td>'
            f'<td class="num">{request["cached_reported"]:,}</td>'
            f'<td class="num">{"n/a" if expected is None else f"{expected:,}"}</td>'
            f"<td>{escape(causes or 'none')}</td></tr>"
        )
    if not rows:
        return '<p class="empty">No cache breaks: every request reused the one before.</p>'
    head = "".join(
        f"<th>{h}</th>" for h in ("request", "turn.step", "prompt", "cached", "allowed", "cause")
    )
    body = "".join(rows)
    return f'<table class="breaks"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _header(session: Session, report: Mapping[str, Any]) -> str:
    totals = report["totals"]
    models = dict.fromkeys(f"{r['provider']} / {r['model']}" for r in report["requests"])
    created = datetime.fromtimestamp(session.info.created / 1000, UTC)
    turns = sum(1 for e in session.events if e.type == "turn/start")
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
        f"{escape(', '.join(models) or 'no requests')} · {turns} turn(s) · "
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
    report = _cache_json(session, rebuilt)
    requests = report["requests"]
    labels = [[cause_label(c, events) for c in r["causes"]] for r in requests]
    bars = [
        Bar(
            index=r["index"],
            turn=r["turn"],
            step=r["step"],
            prompt=r["prompt_tokens"],
            cached=r["cached_reported"],
            expected=r.get("cached_expected"),
            breaks=tuple((c["kind"], label) for c, label in zip(r["causes"], names, strict=True)),
        )
        for r, names in zip(requests, labels, strict=True)
    ]
    kinds = {c["kind"]: CAUSE_TEXT.get(c["kind"], c["kind"]) for r in requests for c in r["causes"]}
    slots = {
        "title": escape(f"tapelog report · {session.id}"),
        "header": _header(session, report),
        "chart": chart_svg(bars),
        "legend": legend_html(kinds, any(b.expected is not None for b in bars)),
        "breaks": _breaks_table(requests, labels),
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
