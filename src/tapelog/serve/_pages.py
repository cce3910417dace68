"""The sessions page, and the page shell the server's own pages share.

The sessions page is the index as a table: every column sortable and the
rows filterable through query parameters, handled here on the server, so the
page needs no script at all (it carries none). It shows 100 rows at a time.
All text from logs and stores (ids, model names, errors) is escaped with the
report's own escaping (``html.escape``).
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from html import escape
from typing import Any, Final

from tapelog.serve._index import Row, rows_bottom_line
from tapelog.store._api import in_families

__all__ = ["ListQuery", "page", "pct", "sessions_html", "when"]

PER_PAGE: Final = 100
_STATUSES: Final = ("running", "idle", "interrupted", "ended", "damaged")


def page(title: str, css: str, body: str) -> str:
    """A whole page: the shared styles inline, no script, nothing from the network."""
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{escape(title)}</title>\n<style>{css}</style>\n</head>\n"
        f"<body>\n<main>\n{body}\n</main>\n</body>\n</html>\n"
    )


def pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.0f}%"


def when(ms: int | None) -> str:
    """Epoch ms as UTC ``2026-11-30 05:45:00`` (empty when unknown)."""
    if ms is None:
        return ""
    return f"{datetime.fromtimestamp(ms / 1000, UTC):%Y-%m-%d %H:%M:%S}"


_SORTS: Final[Mapping[str, Callable[[Row], Any]]] = {
    "id": lambda r: r.id,
    "model": lambda r: (r.summary.provider or "", r.summary.model or ""),
    "created": lambda r: r.summary.created,
    "turns": lambda r: r.summary.turns,
    "requests": lambda r: r.summary.requests,
    "prompt": lambda r: r.summary.prompt_tokens,
    "cached": lambda r: r.summary.cached_tokens,
    "hit": lambda r: r.summary.hit_ratio,
    "efficiency": lambda r: r.efficiency,
    "lost": lambda r: r.lost_tokens,
    "status": lambda r: r.status,
    "parent": lambda r: r.summary.parent,
    "last": lambda r: r.summary.last_time,
}
_COLUMNS: Final = (
    ("id", "session", False),
    ("model", "provider / model", False),
    ("created", "created (UTC)", False),
    ("turns", "turns", True),
    ("requests", "requests", True),
    ("prompt", "prompt tok", True),
    ("cached", "cached tok", True),
    ("hit", "hit ratio", True),
    ("efficiency", "cache efficiency", True),
    ("lost", "tokens lost", True),
    ("status", "status", False),
    ("parent", "parent", False),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ListQuery:
    """The sessions page's query parameters, checked (anything unknown: the default)."""

    q: str = ""
    status: str = ""
    sort: str = "created"
    order: str = "desc"
    page: int = 1

    @classmethod
    def parse(cls, params: Mapping[str, str]) -> ListQuery:
        sort = params.get("sort", "created")
        try:
            number = max(int(params.get("page", "1")), 1)
        except ValueError:
            number = 1
        status = params.get("status", "")
        return cls(
            q=params.get("q", "").strip()[:200],
            status=status if status in _STATUSES else "",
            sort=sort if sort in _SORTS else "created",
            order="asc" if params.get("order") == "asc" else "desc",
            page=number,
        )

    def url(self, **changes: Any) -> str:
        """This query with ``changes``, as a link (``&`` escaped for an attribute)."""
        query = replace(self, **changes)
        default = ListQuery()
        params = {
            k: getattr(query, k)
            for k in ("q", "status", "sort", "order", "page")
            if getattr(query, k) != getattr(default, k)
        }
        return escape("/?" + urllib.parse.urlencode(params) if params else "/")

    def select(self, rows: Sequence[Row]) -> list[Row]:
        """The rows that match, in the asked order (unknown values last either way)."""
        needle = self.q.lower()
        if needle or self.status:
            rows = [r for r in rows if _matches(r, needle, self.status)]
        key = _SORTS[self.sort]
        ordered = sorted(rows, key=lambda r: r.id)
        known = [r for r in ordered if key(r) is not None]
        known.sort(key=key, reverse=self.order == "desc")
        out = known + [r for r in ordered if key(r) is None]
        if self.sort != "created":
            return out
        # by creation: each fork or branch under its parent (a client run's family)
        return [r for _, r in in_families(out, _id_of, _parent_of)]


def _id_of(row: Row) -> str:
    return row.id


def _parent_of(row: Row) -> str | None:
    return row.summary.parent


def _matches(row: Row, needle: str, status: str) -> bool:
    if status and row.status != status:
        return False
    if not needle:
        return True
    s = row.summary
    hay = " ".join([s.id, s.parent or "", row.status, *s.models]).lower()
    return needle in hay


def _head(query: ListQuery) -> str:
    cells = []
    for key, title, _ in _COLUMNS:
        order = "asc" if query.sort == key and query.order == "desc" else "desc"
        mark = (" ▼" if query.order == "desc" else " ▲") if query.sort == key else ""
        css = ' class="sorted"' if query.sort == key else ""
        href = query.url(sort=key, order=order, page=1)
        cells.append(f'<th><a{css} href="{href}">{escape(title)}{mark}</a></th>')
    return "<tr>" + "".join(cells) + "</tr>"


def _cells(row: Row, depth: int = 0) -> str:
    s = row.summary
    sid = escape(s.id)
    # a family member's id is indented under its parent's (serve.css)
    nest = f' class="nest-{min(depth, 3)}"' if depth else ""
    model = escape(f"{s.provider} / {s.model}") if s.provider else ""
    if len(s.models) > 1:
        model += f' <span class="seq">(+{len(s.models) - 1})</span>'
    efficiency = pct(row.efficiency)
    if row.efficiency is not None and not row.audited:
        efficiency = (
            f'<span title="audited before the session grew; audited again once no turn is '
            f'in progress">~{efficiency}</span>'
        )
    lost = "n/a" if row.lost_tokens is None else f"{row.lost_tokens:,}"
    lost_title = f' title="{escape(row.bottom_line)}"' if row.bottom_line else ""
    reason = f' <span class="seq">{escape(s.last_reason)}</span>' if s.last_reason else ""
    status = f'<span class="status status-{row.status}">{row.status}</span>{reason}'
    parent = ""
    if s.parent is not None:
        parent = f'<a href="/s/{escape(s.parent)}"><code>{escape(s.parent)}</code></a>'
    cells = [
        f'<td data-col="id"{nest}><a href="/s/{sid}"><code>{sid}</code></a></td>',
        f'<td data-col="model">{model}</td>',
        f'<td data-col="created">{when(s.created)}</td>',
        f'<td class="num" data-col="turns">{s.turns:,}</td>',
        f'<td class="num" data-col="requests">{s.requests:,}</td>',
        f'<td class="num" data-col="prompt">{s.prompt_tokens:,}</td>',
        f'<td class="num" data-col="cached">{s.cached_tokens:,}</td>',
        f'<td class="num" data-col="hit">{pct(s.hit_ratio)}</td>',
        f'<td class="num" data-col="efficiency">{efficiency}</td>',
        f'<td class="num" data-col="lost"{lost_title}>{lost}</td>',
        f'<td data-col="status">{status}</td>',
        f'<td data-col="parent">{parent}</td>',
    ]
    if row.error is not None:
        cells.append(f'<td class="error" data-col="error">{escape(row.error)}</td>')
    return "".join(cells)


def _bottom_line(rows: Sequence[Row]) -> str:
    """The audits' bottom line over the matching sessions, the worst one linked."""
    text = rows_bottom_line(
        rows,
        text=escape,
        name=lambda sid: f'<a href="/s/{escape(sid)}"><code>{escape(sid)}</code></a>',
    )
    return f'<p class="bottom-line">{text}</p>' if text else ""


def _pages(query: ListQuery, count: int) -> str:
    last = max((count + PER_PAGE - 1) // PER_PAGE, 1)
    if last == 1:
        return ""
    number = min(query.page, last)
    links = []
    for label, target in (("« first", 1), ("‹ previous", number - 1)):
        if 1 <= target < number:
            links.append(f'<a href="{query.url(page=target)}">{label}</a>')
    links.append(f"<b>page {number} of {last}</b>")
    for label, target in (("next ›", number + 1), ("last »", last)):
        if number < target <= last:
            links.append(f'<a href="{query.url(page=target)}">{label}</a>')
    return f'<div class="pages">{"".join(links)}</div>'


def sessions_html(
    rows: Sequence[Row], shown: Sequence[Row], query: ListQuery, *, label: str, total: int
) -> str:
    """The sessions page's body: filters, the table of ``shown`` rows, the pages.

    ``rows`` are every row that matched (``shown`` is the page of them), ``total``
    how many sessions the store holds.
    """
    audited = sum(1 for r in rows if r.audited)
    note = ""
    if audited < len(rows):
        note = (
            f" · cache efficiency audited for {audited:,} of {len(rows):,} (the rest "
            "in the background; reload to see more)"
        )
    options = "".join(
        f'<option value="{s}"{" selected" * (query.status == s)}>{s or "any"}</option>'
        for s in ("", *_STATUSES)
    )
    filters = (
        '<form class="filters" method="get" action="/">'
        f'<label>search <input type="search" name="q" value="{escape(query.q)}" '
        'placeholder="id, model, parent"></label>'
        f'<label>status <select name="status">{options}</select></label>'
        f'<input type="hidden" name="sort" value="{query.sort}">'
        f'<input type="hidden" name="order" value="{query.order}">'
        '<button type="submit">filter</button></form>'
    )
    nested = query.sort == "created"
    placed = in_families(shown, _id_of, _parent_of) if nested else [(0, r) for r in shown]
    body = "".join(f'<tr data-id="{escape(r.id)}">{_cells(r, d)}</tr>' for d, r in placed)
    if not shown:
        body = f'<tr><td colspan="{len(_COLUMNS)}" class="empty">No sessions match.</td></tr>'
    matched = f"{len(rows):,} of {total:,}" if len(rows) != total else f"{total:,}"
    return (
        f'<h1>Sessions</h1><p class="sub">{matched} sessions in <code>{escape(label)}</code>'
        f"{note}</p>{_bottom_line(rows)}{filters}"
        f'<table class="sessions"><thead>{_head(query)}</thead><tbody>{body}</tbody></table>'
        f"{_pages(query, len(rows))}"
        "<footer>Served read-only by <code>tapelog serve</code>: every number comes from the "
        "stored logs (docs/serve.md).</footer>"
    )
