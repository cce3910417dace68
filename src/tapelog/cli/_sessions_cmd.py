"""``tapelog sessions``: every stored session with its cache bottom line, newest first.

The rows are those ``tapelog serve`` shows, from the same sessions index
(``tapelog.serve._api``) and the same index file between runs, so a second
listing only audits what changed. Every session is loaded and audited once
(the store's full load: a damaged line anywhere is found, not only at the
ends), except one a writer is inside a turn of. docs/cli.md documents the JSON.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import asdict
from typing import Any, Final

import click
from rich.table import Table
from rich.text import Text

from tapelog._errors import StoreError
from tapelog.cli._common import store_option
from tapelog.cli._serve_cmd import default_index
from tapelog.cli._store_cmds import _clock as clock
from tapelog.cli._store_cmds import _console as console
from tapelog.cli._stores import open_store, store_label
from tapelog.cli._terminal import terminal_text
from tapelog.log._api import encode_str
from tapelog.serve._api import Row, SessionIndex, rows_bottom_line
from tapelog.store import JsonlStore, SessionStore, SessionSummary
from tapelog.store._api import in_families

__all__ = ["COMMANDS"]

_ALL: Final = 1 << 62
"""The audit budget of a listing: every session (``SessionIndex.audit`` counts events)."""

_SORTS: Final[Mapping[str, Callable[[Row], Any]]] = {
    "created": lambda r: r.summary.created,
    "last": lambda r: r.summary.last_time,
    "lost": lambda r: r.lost_tokens,
    "efficiency": lambda r: r.efficiency,
    "hit": lambda r: r.summary.hit_ratio,
    "prompt": lambda r: r.summary.prompt_tokens,
    "requests": lambda r: r.summary.requests,
    "model": lambda r: (r.summary.provider or "", r.summary.model or ""),
    "id": lambda r: r.id,
}
_ASCENDING: Final = frozenset({"efficiency", "hit", "model", "id"})
"""Sorted worst or alphabetical first; the others largest or newest first."""


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.0f}%"


def _rows(opened: SessionStore, sort: str) -> list[Row]:
    index = SessionIndex(opened, default_index(store_label(opened)))
    try:
        rows = index.rows()
        index.audit([r.id for r in rows], events=_ALL)
        rows = index.rows(refresh=False)
    finally:
        index.save(force=True)
    key = _SORTS[sort]
    ordered = sorted(rows, key=lambda r: r.id)
    known = [r for r in ordered if key(r) is not None]
    known.sort(key=key, reverse=sort not in _ASCENDING)
    return known + [r for r in ordered if key(r) is None]


def _error(row: Row, stored: SessionSummary | None) -> str | None:
    """Why the session is damaged: the store's listing says it best when it can
    tell (a format version, a missing header); else the index's fold or the audit's load."""
    return stored.error if stored is not None and stored.error is not None else row.error


def _json(row: Row, stored: SessionSummary | None) -> dict[str, Any]:
    s = row.summary
    error = _error(row, stored)
    return {
        **(asdict(stored) if stored is not None else {}),
        "id": row.id,
        "error": error,
        "status": "damaged" if error is not None else row.status,
        "provider": s.provider,
        "model": s.model,
        "requests": s.requests,
        "prompt_tokens": s.prompt_tokens,
        "cached_tokens": s.cached_tokens,
        "hit_ratio": s.hit_ratio,
        "efficiency": row.efficiency,
        "lost_tokens": row.lost_tokens,
        "bottom_line": row.bottom_line,
    }


def _table(label: str, rows: list[tuple[int, Row]], stored: Mapping[str, SessionSummary]) -> Table:
    table = Table(title=Text(f"sessions in {label}"), title_justify="left")
    # Every column keeps its width but the model's and the parent's; a damaged
    # session's reason is said under the table, so it squeezes nothing.
    table.add_column("id", no_wrap=True)
    table.add_column("provider / model", min_width=10)
    table.add_column("created (UTC)", no_wrap=True, min_width=19)
    table.add_column("req", justify="right", no_wrap=True)
    table.add_column("hit", justify="right", no_wrap=True)
    table.add_column("efficiency", justify="right", no_wrap=True)
    table.add_column("lost tok", justify="right", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("parent")
    for depth, row in rows:
        s = row.summary
        model = f"{s.provider} / {s.model}" if s.provider else ""
        table.add_row(
            Text(("  " * (depth - 1) + "└ " if depth else "") + row.id),
            Text(terminal_text(model)),
            Text(clock(s.created, date=True) if s.created is not None else ""),
            Text(f"{s.requests:,}"),
            Text(_pct(s.hit_ratio)),
            Text(_pct(row.efficiency)),
            Text("n/a" if row.lost_tokens is None else f"{row.lost_tokens:,}"),
            Text("damaged" if _error(row, stored.get(row.id)) is not None else row.status),
            Text(terminal_text(s.parent or "")),
        )
    return table


@click.command("sessions")
@store_option
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array instead of a table.")
@click.option(
    "--sort",
    type=click.Choice(list(_SORTS)),
    default="created",
    show_default=True,
    help="Order: lost, prompt, requests, created, last largest first; "
    "efficiency, hit worst first; model, id alphabetical.",
)
def sessions_cmd(store: str | None, as_json: bool, sort: str) -> None:
    """List stored sessions with their cache bottom line, newest first.

    In creation order, each fork or branch is listed under its parent: a client
    run's main agent, then its subagents and side calls, oldest first.

    Each row: provider / model, hit ratio, cache efficiency and the prompt
    tokens paid at full price that the cache could have served (the audit of
    `tapelog cache`); a session that does not load is listed as damaged.
    """
    opened = open_store(store)
    named = store is not None or bool(os.environ.get("TAPELOG_STORE"))
    if named and isinstance(opened, JsonlStore) and not opened.root.is_dir():
        raise StoreError(f"no store at {store}: the directory does not exist")
    stored = {s.id: s for s in opened.list()}
    rows = _rows(opened, sort) if stored else []
    if as_json:
        click.echo(encode_str([_json(r, stored.get(r.id)) for r in rows]))
        return
    if not rows:
        click.echo(f"no sessions in {store_label(opened)}")
        return
    out = console()
    out.print(Text(terminal_text(rows_bottom_line(rows))), soft_wrap=True)
    placed = (
        in_families(rows, lambda r: r.id, lambda r: r.summary.parent)
        if sort == "created"
        else [(0, r) for r in rows]
    )
    out.print(_table(store_label(opened), placed, stored))
    errors = {r.id: _error(r, stored.get(r.id)) for r in rows}
    damaged = [f"  {sid}: {error}" for sid, error in errors.items() if error is not None]
    if damaged:
        out.print(Text(terminal_text("\n".join(["damaged:", *damaged]))), soft_wrap=True)


COMMANDS: list[click.Command] = [sessions_cmd]
