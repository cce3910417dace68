"""The sessions index: one small row per stored session, kept current cheaply.

Drawing the sessions page never replays a log. Each refresh asks the store
for its incremental summaries (:meth:`tapelog.store.SessionStore.summaries`,
folding each session's :class:`~tapelog.serve._summary.Summary`): an unchanged
session costs the store one check of its cursor (a ``stat`` or an index
probe); a session that grew is folded from where the last fold stopped. Which
sessions are running is the store's answer too (``active_sessions``).

The cache efficiency needs the cache audit's simulation, which costs a load
and a walk of the whole log, so it is filled in separately: for the sessions
a page shows (up to a number of events per page: a budget of work, so what a
page shows does not depend on the machine's load), then by a background
thread for the rest, newest first. It is the very :func:`tapelog.audit.cache_report`
of ``tapelog cache``, run on the log as the store loads it (every event
validated, every digest checked), so a session that does not load is marked
damaged here too; or the totals of the checkpoint ``tapelog cache`` left for
exactly the session's bytes (which loaded when it was written). An audit
belongs to the number of events it read; when a session grows the row shows
the old efficiency as stale until it is audited again, which happens once no
turn is in progress (an idle session a writer holds between turns is audited
too).

The index is kept in memory and, unless told otherwise, in a file outside the
store (the server never writes to the store), so a restart starts warm; every
entry read back is checked against the store's key like any other, and an
unreadable or foreign file is ignored and replaced.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from tapelog._errors import TapelogError
from tapelog.audit import cache_report
from tapelog.audit._api import CacheTotals
from tapelog.log import decode, encode
from tapelog.serve._checkpoints import stored_checkpoint
from tapelog.serve._entry import Audited, Entry, activity
from tapelog.serve._summary import Summary
from tapelog.store import JsonlStore, SessionStore
from tapelog.store._api import Folded

__all__ = ["Row", "SessionIndex", "rows_bottom_line", "store_label"]

_log = logging.getLogger("tapelog.serve")
_FORMAT: Final = 3
_SAVE_EVERY_S: Final = 5.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    """What the sessions page shows of one session."""

    summary: Summary
    status: str
    """:func:`~tapelog.serve._entry.activity` (``running``, ``idle``,
    ``interrupted``, ``ended``), or ``damaged`` (it could not be read; ``error``
    says why)."""
    efficiency: float | None
    """The cache efficiency of the last audit (``None``: not audited yet)."""
    lost_tokens: int | None = None
    """Prompt tokens paid at full price that the cache could have served (last audit)."""
    bottom_line: str | None = None
    """The last audit's bottom line."""
    audited: bool
    """Whether ``efficiency`` is of the log as it is now (else older, or none)."""
    error: str | None

    @property
    def id(self) -> str:
        return self.summary.id


def _same(text: str) -> str:
    return text


def rows_bottom_line(
    rows: Sequence[Row],
    *,
    text: Callable[[str], str] = _same,
    name: Callable[[str], str] = _same,
) -> str:
    """The audits' bottom line over many sessions, the one that lost most named
    (``""`` when none is audited). ``text`` and ``name`` render log text and
    the worst session's id for the medium (HTML escapes and links them)."""
    audited = [r for r in rows if r.lost_tokens is not None]
    if not audited:
        return ""
    losing = [r for r in audited if r.lost_tokens]
    if not losing:
        noun = "session" if len(audited) == 1 else "sessions"
        return (
            "No prompt tokens paid at full price that the cache could have served, in "
            f"{len(audited):,} audited {noun}."
        )
    lost = sum(r.lost_tokens or 0 for r in losing)
    worst = max(losing, key=lambda r: (r.lost_tokens or 0, r.id))
    noun = "session" if len(losing) == 1 else "sessions"
    return (
        f"{lost:,} prompt tokens paid at full price that the cache could have served, in "
        f"{len(losing):,} {noun}. The most in {name(worst.id)}: {text(worst.bottom_line or '')}"
    )


def store_label(store: SessionStore) -> str:
    """How pages (and the index file) name the store: a JSONL store's directory."""
    return str(store.root) if isinstance(store, JsonlStore) else repr(store)


def _new_summary() -> Summary:
    return Summary(id="")  # the store's row fills in the id (Summary.stored)


def _row(entry: Entry, running: bool) -> Row:
    summary, audit = entry.summary, entry.audit
    error = summary.error
    if error is None and audit is not None and audit.error is not None:
        error = audit.error
    status = "damaged" if error is not None else activity(running, summary.open_turn)
    good = audit is not None and audit.error is None
    return Row(
        summary=summary,
        status=status,
        efficiency=None if audit is None else audit.efficiency,
        lost_tokens=audit.lost_tokens if good and audit is not None else None,
        bottom_line=audit.bottom_line if good and audit is not None else None,
        audited=entry.audited is not None,
        error=error,
    )


class SessionIndex:
    """Rows for every session of ``store`` (see the module docstring).

    ``path`` is where the index is kept between runs (``None``: memory only).
    Thread-safe: pages, the background auditor and the live views share it.
    """

    def __init__(self, store: SessionStore, path: Path | None = None) -> None:
        self._store = store
        self.label = store_label(store)
        self._path = path
        self._lock = threading.Lock()
        self._entries: dict[str, Entry] = self._read() if path is not None else {}
        self._running: set[str] = set()
        self._dirty = False
        self._saved = time.monotonic()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._worker: threading.Thread | None = None

    # --- rows ------------------------------------------------------------------

    def rows(self, *, refresh: bool = True) -> list[Row]:
        """Every session's row (``refresh``: bring the index up to date first)."""
        if refresh:
            with self._lock:
                old = self._entries
                folded = self._store.summaries({i: e.folded for i, e in old.items()}, _new_summary)
                new = {i: self._entry(f, old.get(i)) for i, f in folded.items()}
                self._dirty |= len(new) != len(old)
                self._entries = new
            running = self._store.active_sessions()
            with self._lock:
                self._running = running
            self._wake.set()
            self.save(force=False)
        with self._lock:
            return [_row(e, e.summary.id in self._running) for e in self._entries.values()]

    def _entry(self, folded: Folded[Summary], before: Entry | None) -> Entry:
        if before is not None and folded is before.folded:
            return before
        self._dirty = True
        folded.fold.stored(folded)
        # an audit of the log as it was is kept, and shown as stale
        return Entry(folded=folded, audit=None if before is None else before.audit)

    def children(self) -> dict[str, list[str]]:
        """Each parent's forks (from the rows as last refreshed), oldest first."""
        out: dict[str, list[str]] = {}
        with self._lock:
            entries = sorted(self._entries.values(), key=lambda e: e.summary.created or 0)
        for entry in entries:
            if entry.summary.parent is not None:
                out.setdefault(entry.summary.parent, []).append(entry.summary.id)
        return out

    def parents(self) -> dict[str, str | None]:
        """Each session's parent (from the rows as last refreshed)."""
        with self._lock:
            return {i: e.summary.parent for i, e in self._entries.items()}

    def pending(self) -> list[str]:
        """Sessions whose audit is missing or stale and that are not in a turn, newest first.

        A session a writer holds between turns (idle: a proxy keeps every session
        it served open) is audited too: its log grows by whole turns only."""
        with self._lock:
            todo = [
                e
                for e in self._entries.values()
                if e.audited is None
                and e.summary.error is None
                and activity(e.summary.id in self._running, e.summary.open_turn) != "running"
            ]
        todo.sort(key=lambda e: (e.summary.created or 0, e.summary.id), reverse=True)
        return [e.summary.id for e in todo]

    # --- the audit ---------------------------------------------------------------

    def audit(self, ids: Iterable[str], *, events: int) -> None:
        """Audit those of ``ids`` that need it, in order, as long as the events
        audited stay within ``events`` (a session that would go over it is left
        to the background auditor).

        The budget is work, not time: which rows a page shows audited depends on
        the store alone, never on how loaded the machine is."""
        wanted = set(self.pending())
        with self._lock:
            sizes = {i: e.summary.events for i, e in self._entries.items() if i in wanted}
        spent = 0
        for session_id in ids:
            size = sizes.get(session_id)
            if size is None or spent + size > events:
                continue
            spent += size
            self._audit_one(session_id)

    def _totals(self, session_id: str) -> tuple[int, CacheTotals]:
        """The session's event count and audit totals: from a checkpoint of
        exactly its bytes (they loaded when it was written), else audited."""
        kept = stored_checkpoint(self._store, session_id)
        if kept is not None and kept.covers(self._store.session_bytes(session_id), None):
            return kept.events, kept.report().totals
        session = self._store.load(session_id).session
        return len(session), cache_report(session).totals

    def _audit_one(self, session_id: str) -> None:
        with self._lock:
            entry = self._entries.get(session_id)
        if entry is None:
            return
        events = entry.summary.events
        try:
            size, totals = self._totals(session_id)
            line = totals.bottom_line
            audited = Audited(
                events=size,
                requests=totals.requests,
                prompt_tokens=totals.prompt_tokens,
                cached_tokens=totals.cached_reported,
                expected=totals.cached_expected,
                lost_tokens=line.lost_tokens,
                cross_session_tokens=line.cross_session_tokens,
                bottom_line=line.sentence,
            )
        except (TapelogError, OSError) as exc:
            audited = Audited(events=events, error=str(exc))
        with self._lock:
            entry = self._entries.get(session_id)
            if entry is None:
                return
            entry.audit = audited
            self._dirty = True
            summary = entry.summary
            if audited.error is None and audited.events == summary.events:
                counts = (summary.requests, summary.prompt_tokens, summary.cached_tokens)
                if counts != (audited.requests, audited.prompt_tokens, audited.cached_tokens):
                    _log.warning(
                        "session %s: the index counted %s but the cache audit %s",
                        session_id,
                        counts,
                        (audited.requests, audited.prompt_tokens, audited.cached_tokens),
                    )

    def start(self) -> None:
        """Start the background auditor (idempotent)."""
        if self._worker is None:
            self._worker = threading.Thread(
                target=self._work, name="tapelog-serve-audit", daemon=True
            )
            self._worker.start()

    def _work(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(timeout=10)
            self._wake.clear()
            for session_id in self.pending():
                if self._stop.is_set():
                    return
                try:
                    self._audit_one(session_id)
                except Exception:  # never let one session stop the auditor
                    _log.exception("auditing session %s failed", session_id)
                self.save(force=False)
                time.sleep(0.002)  # let page requests have the interpreter
            self.save(force=False)

    def close(self) -> None:
        """Stop the auditor and save the index."""
        self._stop.set()
        self._wake.set()
        if self._worker is not None:
            self._worker.join(timeout=10)
        self.save(force=True)

    # --- the file ----------------------------------------------------------------

    def _read(self) -> dict[str, Entry]:
        assert self._path is not None
        try:
            lines = self._path.read_bytes().split(b"\n")
            head = decode(lines[0])
        except (OSError, TapelogError):
            return {}
        if head != {"tapelog_serve_index": _FORMAT, "store": self.label}:
            return {}
        entries: dict[str, Entry] = {}
        for line in lines[1:]:
            if not line:
                continue
            try:
                entry = Entry.from_json(decode(line))
            except (TapelogError, ValueError, TypeError, KeyError):
                continue  # a damaged entry is folded again
            entries[entry.summary.id] = entry
        return entries

    def save(self, *, force: bool) -> None:
        """Write the index file if it changed (at most every 5 s unless ``force``)."""
        if self._path is None:
            return
        with self._lock:
            if not self._dirty or (not force and time.monotonic() - self._saved < _SAVE_EVERY_S):
                return
            head = {"tapelog_serve_index": _FORMAT, "store": self.label}
            data = b"\n".join(
                [encode(head), *(encode(e.to_json()) for e in self._entries.values())]
            )
            self._dirty = False
            self._saved = time.monotonic()
        path = self._path
        temp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data + b"\n")
            os.replace(temp, path)
        except OSError as exc:  # a cache: the server works without it
            _log.warning("could not save the sessions index to %s: %s", path, exc)
            with contextlib.suppress(OSError):
                temp.unlink()
