"""The cache audit of a log that is still growing: a row per request as it ends.

``tapelog proxy`` prints a line when a request's cacheable prefix broke, while
it runs. It must name the cause exactly as ``tapelog cache`` will, so this is
not a second audit: :class:`CacheWatch` keeps the state ``cache_report``
keeps between two requests (the segment renderer, the simulated prefix
stores, the previous request) and feeds each new request to the very same
per-request function (``_cache_report._audit_one``). Each call costs what
the log grew by; the first one over a reopened session reads it once.
"""

from __future__ import annotations

from dataclasses import dataclass

from tapelog.audit._audit_state import Seen
from tapelog.audit._cache_report import RequestCache, _audit_one
from tapelog.audit._log_causes import Previous
from tapelog.audit._segments import SegmentRenderer
from tapelog.cache._api import PrefixStore, Rule
from tapelog.log._api import Session
from tapelog.request._api import RequestWalker, reading_seq

__all__ = ["CacheBreak", "CacheWatch"]

_SHORT = "reported below expected"
"""The one cause that is not a lost prefix: the provider read less than it could."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheBreak:
    """A request whose cacheable prefix broke, as the live line shows it."""

    session_id: str | None
    row: RequestCache
    could_read: int
    """Prompt tokens a cache could have served had the prefix held: the
    previous request's prompt when the prefix changed or the cache was lost,
    else what the simulation expected; less what the provider reported."""

    def line(self) -> str:
        """One line: session, request number, causes as ``tapelog cache`` labels
        them, and the tokens lost (untrusted names inside: print it through a
        terminal filter)."""
        causes = ", ".join(c.label for c in self.row.causes) or "unexplained"
        return (
            f"cache break: {self.session_id or '-'} request {self.row.index}: {causes}; "
            f"{self.could_read:,} prompt tokens could have been read from cache"
        )


class CacheWatch:
    """The rows ``cache_report`` would give ``session``, a request at a time."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self._walker = RequestWalker(session.events, session.id, False)
        self._renderer = SegmentRenderer()
        self._stores: dict[Rule, PrefixStore] = {}
        self._seen: dict[Rule, Seen] = {}
        self._previous: Previous | None = None
        self._last: RequestCache | None = None
        self._next = 0

    def advance(self) -> list[RequestCache]:
        """The rows of the requests logged since the last call (call it when no
        step is open: a request's row needs its answer)."""
        events = self.session.events
        rows: list[RequestCache] = []
        for seq in range(self._next, len(events)):
            with reading_seq(seq):
                for walked in self._walker.visit(events[seq]):
                    row, self._previous = _audit_one(
                        walked, self._renderer, self._stores, self._seen, self._previous
                    )
                    rows.append(row)
        self._next = len(events)
        return rows

    def breaks(self) -> list[CacheBreak]:
        """:meth:`advance`, keeping only the requests whose prefix broke."""
        out: list[CacheBreak] = []
        for row in self.advance():
            before, self._last = self._last, row
            if not row.drop:
                continue
            lost_prefix = any(c.detail.get("reason") != _SHORT for c in row.causes)
            held = before.prompt_tokens if lost_prefix and before is not None else 0
            could = max(held, row.cached_expected) - row.cached_reported
            out.append(CacheBreak(session_id=self.session.id, row=row, could_read=max(could, 0)))
        return out
