"""One step of the loop, folded event by event: was its request sent, and what answered it.

The rule for which steps were sent lives here, once, for every reader that
counts requests: :func:`tapelog.request.walk_requests` (and so the cache
audit, ``tapelog requests``, the diff) feeds a step's events to a
:class:`StepFold` as its one pass over the log reaches them; the sessions
list of ``tapelog serve`` feeds it the events as a store hands them over and
reads the same answer. A step's request was sent unless

* its ``step/end`` says ``"sent": false`` (the loop logs that when a step
  failed before its request left), or
* it is open at the end of the log and no request header is logged at all
  (cut before its first header: it never left).

A step ends at its ``step/end``, or at the next ``step/start`` or
``turn/start`` (a log cut there and repaired), which then count as sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from tapelog.log._api import EpochHeader, Event, chunk_kind, fold_header_event, peek_data

__all__ = ["HEADER_TYPES", "HeaderChange", "StepFold"]

HEADER_TYPES: Final = frozenset({"request/header", "request/header-delta"})
_STEP_OUTPUT: Final = frozenset({"assistant/chunk", "assistant/message", "step/end", "turn/end"})
_STEP_BREAK: Final = frozenset({"step/start", "turn/start"})


@dataclass(frozen=True, slots=True)
class HeaderChange:
    """A header event and the headers folded just before and after it."""

    event: Event
    before: EpochHeader | None
    after: EpochHeader


class StepFold:
    """The events of one step, fed in order from its ``step/start`` at seq
    ``start`` (see the module docstring). ``header`` is the request header
    folded before the step (the step's own header events are folded onto it).
    A reader without :class:`Event` objects (the sessions list folds decoded
    lines) feeds types and data with :meth:`feed_data`, passes ``None`` with
    ``fold_headers=False`` and says with ``headed`` whether any header was
    logged before the step."""

    __slots__ = (
        "_in_header",
        "_sent",
        "changes",
        "closed",
        "failed_attempts",
        "fold_headers",
        "headed",
        "header",
        "header_seqs",
        "message",
        "start",
        "usage",
    )

    def __init__(
        self,
        start: int,
        header: EpochHeader | None,
        *,
        headed: bool = False,
        fold_headers: bool = True,
    ) -> None:
        self.start = start
        self.header = header
        self.headed = headed or header is not None
        self.fold_headers = fold_headers
        self.header_seqs: list[int] = []
        self.changes: list[HeaderChange] = []
        self.message: Event | None = None
        self.usage: Mapping[str, Any] | None = None
        """The ``usage`` of the step's ``assistant/message`` (``None``: none yet)."""
        self.failed_attempts = 0
        self.closed = False
        self._in_header = True
        self._sent = True

    def feed(self, event: Event) -> bool:
        """Fold the next event of the log; ``False`` when it is not the step's
        (the step has ended: at its ``step/end``, or before this event)."""
        return self._feed(event.type, event, None)

    def feed_chunk(self, event: Event) -> bool:
        """:meth:`feed` of an ``assistant/chunk`` (most of a step's events), directly."""
        if self.closed:
            return False
        self._in_header = False
        if chunk_kind(event) == "error":
            self.failed_attempts += 1
        return True

    def feed_data(self, etype: str, data: Mapping[str, Any]) -> bool:
        """:meth:`feed` for a reader that has an event's type and data only."""
        return self._feed(etype, None, data)

    def _feed(self, etype: str, event: Event | None, data: Mapping[str, Any] | None) -> bool:
        if self.closed:
            return False
        if etype in _STEP_BREAK:
            self.closed = True
            return False
        if etype in _STEP_OUTPUT:
            self._in_header = False
        if self._in_header and etype in HEADER_TYPES:
            self.headed = True
            if self.fold_headers and event is not None:
                after = fold_header_event(self.header, event)
                assert after is not None
                self.changes.append(HeaderChange(event, self.header, after))
                self.header = after
                self.header_seqs.append(event.seq)
        elif etype == "assistant/message":
            self.message = event
            usage = (event.data if event is not None else data or {}).get("usage")
            self.usage = usage if isinstance(usage, Mapping) else None
        elif etype == "assistant/chunk":
            if event is not None and chunk_kind(event) == "error":
                self.failed_attempts += 1
        elif etype == "step/end":
            self._sent = (peek_data(event) if event is not None else data or {}).get(
                "sent"
            ) is not False
            self.closed = True
        return True

    @property
    def in_header(self) -> bool:
        """Whether the step's events so far are header events alone (a header
        event fed now is the step's own)."""
        return self._in_header and not self.closed

    def copy(self) -> StepFold:
        """An independent copy (fed on while the original stays as it was)."""
        other = StepFold(
            self.start, self.header, headed=self.headed, fold_headers=self.fold_headers
        )
        other.header_seqs, other.changes = list(self.header_seqs), list(self.changes)
        other.message, other.usage = self.message, self.usage
        other.failed_attempts = self.failed_attempts
        other.closed, other._in_header, other._sent = self.closed, self._in_header, self._sent
        return other

    @property
    def sent(self) -> bool:
        """Whether the step's request left (as far as the events fed so far say:
        a step still open counts once a request header is logged)."""
        return self._sent if self.closed else self.headed
