"""A session's page: the report's own parts, a window of its requests, forks, live updates.

Everything between the navigation and the footer is
:func:`tapelog.audit.report_parts`, the very views ``tapelog report`` writes
into its file. This module adds only what a server has and a file does not:
links between pages (:class:`ServeLinks`: a target on another window's page
is a link to that page), the fork tree from the index, a form to compare two
requests, the status, and on the last window the small script that appends
new events (``live.js``).

A long session is shown :data:`WINDOW` requests at a time (with the timeline
of the same stretch of the log); totals, chart and breaks always cover the
whole session. Without a choice the page shows the last window.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Final

from tapelog.audit import report_html
from tapelog.audit._api import ReportLinks, ReportWindow, report_parts, report_windows
from tapelog.log import encode
from tapelog.serve._live import LiveSession

__all__ = ["WINDOW", "ServeLinks", "pick_window", "session_html"]

WINDOW: Final = 50
_FORK_DEPTH: Final = 8
_FORKS_SHOWN: Final = 50
_FOOTER: Final = (
    "Served read-only by <code>tapelog serve</code> with the views of <code>tapelog report</code>"
    "; everything is rebuilt from the stored log, and nothing is loaded from the network."
)


class ServeLinks(ReportLinks):
    """The report's links on a server page showing ``window`` of session ``session_id``."""

    def __init__(self, session_id: str, window: ReportWindow, *, count: int) -> None:
        self._id = escape(session_id)
        self._window = window
        self._count = count

    def request(self, index: int) -> str:
        if self._window.first <= index <= self._window.last:
            return f"#req-{index}"
        return f"/s/{self._id}?req={index}#req-{index}"

    def seq(self, seq: int) -> str:
        if self._window.first_seq <= seq < self._window.end_seq:
            return f"#seq-{seq}"
        return f"/s/{self._id}?seq={seq}#seq-{seq}"

    def session(self, session_id: str) -> str | None:
        return f"/s/{escape(session_id)}"

    def request_actions(self, index: int) -> str:
        base = f"/s/{self._id}"
        out = f'<a href="{base}/requests/{index}.json" download>request body (JSON)</a>'
        if index > 1:
            out += f'<a href="{base}/diff?a={index - 1}&amp;b={index}">diff with #{index - 1}</a>'
        if index < self._count:
            out += f'<a href="{base}/diff?a={index}&amp;b={index + 1}">diff with #{index + 1}</a>'
        return out


class LiveLinks(ServeLinks):
    """Links in what a live update appends: new requests are on no page yet."""

    def request(self, index: int) -> str:
        return f"/s/{self._id}?req={index}#req-{index}"


def pick_window(windows: Sequence[ReportWindow], params: Mapping[str, str]) -> ReportWindow:
    """The window a page asked for: ``req=N`` (the one holding request N), ``seq=S``
    (the one holding event S), else the last."""
    try:
        if "req" in params:
            index = int(params["req"])
            return next((w for w in windows if w.first <= index <= w.last), windows[-1])
        if "seq" in params:
            seq = int(params["seq"])
            return next((w for w in windows if w.first_seq <= seq < w.end_seq), windows[-1])
    except ValueError:
        pass
    return windows[-1]


def _window_nav(session_id: str, windows: Sequence[ReportWindow], window: ReportWindow) -> str:
    count = windows[-1].last
    if len(windows) == 1:
        return ""
    base = f"/s/{escape(session_id)}"
    at = windows.index(window)
    links = []
    for label, target in (("« first", 0), ("‹ earlier", at - 1)):
        if 0 <= target < at:
            links.append(f'<a href="{base}?req={windows[target].first}">{label}</a>')
    links.append(f"<b>requests {window.first:,}–{window.last:,} of {count:,}</b>")
    for label, target in (("later ›", at + 1), ("last »", len(windows) - 1)):
        if at < target < len(windows):
            links.append(f'<a href="{base}?req={windows[target].first}">{label}</a>')
    form = (
        f'<form method="get" action="{base}">go to request '
        f'<input type="number" name="req" min="1" max="{count}" value="{window.first}"> '
        '<button type="submit">go</button></form>'
    )
    return f'<div class="window">{"".join(links)}{form}</div>'


def _forks(
    session_id: str, parents: Mapping[str, str | None], children: Mapping[str, list[str]]
) -> str:
    """The session's family: its root ancestor and every fork or branch below it,
    this one marked."""
    root, seen = session_id, {session_id}
    while (parent := parents.get(root)) is not None and parent not in seen and len(seen) < 50:
        root = parent
        seen.add(parent)
    if root == session_id and not children.get(session_id):
        return ""

    def tree(node: str, depth: int) -> str:
        label = f"<code>{escape(node)}</code>"
        label = (
            f'<span class="here">{label} (this session)</span>'
            if node == session_id
            else f'<a href="/s/{escape(node)}">{label}</a>'
        )
        kids = children.get(node, [])
        if not kids or depth >= _FORK_DEPTH:
            return f"<li>{label}</li>"
        more = len(kids) - _FORKS_SHOWN
        items = "".join(tree(k, depth + 1) for k in kids[:_FORKS_SHOWN])
        items += f"<li>… {more} more</li>" * (more > 0)
        return f"<li>{label}<ul>{items}</ul></li>"

    # forks, and the sessions the proxy branched off for another agent of the client
    return f'<section class="forks"><b>Family</b><ul>{tree(root, 0)}</ul></section>'


def _nav(session_id: str, status: str, count: int) -> str:
    base = f"/s/{escape(session_id)}"
    diff = ""
    if count >= 2:
        diff = (
            f'<form method="get" action="{base}/diff">compare request '
            f'<input type="number" name="a" min="1" max="{count}" value="{count - 1}"> with '
            f'<input type="number" name="b" min="1" max="{count}" value="{count}"> '
            '<button type="submit">diff</button></form>'
        )
    return (
        f'<nav class="top"><a href="/">← all sessions</a>'
        f'<span class="status status-{status}" data-status>{status}</span>{diff}</nav>'
    )


def session_html(
    live: LiveSession,
    params: Mapping[str, str],
    *,
    status: str,
    css: str,
    live_script: str,
    parents: Mapping[str, str | None],
    children: Mapping[str, list[str]],
) -> str:
    """The whole page (call with ``live.lock`` held and the session polled)."""
    session = live.session
    walked = live.walked()
    windows = report_windows(session.events, walked, WINDOW)
    window = pick_window(windows, params)
    links = ServeLinks(live.id, window, count=len(walked))
    parts = live.parts(
        window.first,
        lambda: report_parts(
            session,
            walked=walked,
            audit=live.audit(),
            window=window,
            links=links,
            bodies=live.bodies(),
            pieces=live.pieces(),
        ),
    )
    parents = {**parents, live.id: session.info.parent}
    nav = _nav(live.id, status, len(walked)) + _forks(live.id, parents, children)
    for warning in live.warnings:
        nav += f'<p class="note">warning: {escape(warning)}</p>'
    after = ""
    if window is windows[-1]:
        config = {"events": f"/s/{live.id}/events?after={len(session) - 1}"}
        data = encode(config).decode("utf-8").replace("<", "\\u003c")
        after = (
            f'<script type="application/json" id="tapelog-live">{data}</script>'
            f"<script>{live_script}</script>"
        )
        nav += (
            '<p class="live-note">Live: new events join the timeline as they are stored; '
            "the chart and the requests show the log as it was when this page loaded.</p>"
        )
    return report_html(
        parts,
        css=css,
        nav=nav,
        window=_window_nav(live.id, windows, window),
        footer=_FOOTER,
        after=after,
    )
