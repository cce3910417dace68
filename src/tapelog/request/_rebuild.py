"""Rebuilding the requests a log says were sent, as the loop built them.

:func:`rebuild_requests` keeps every request of :func:`walk_requests`;
:func:`rebuild_request_at` rebuilds the one anchored at a given seq from a
fresh fold of the log before it. Both end in the very functions the loop and
the compaction call (``build_request``, ``summary_request``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from tapelog._errors import LogError
from tapelog.log._api import Event, Session, paused_gc
from tapelog.request._request import LlmRequest
from tapelog.request._walk import trusted_events, walk_requests

__all__ = ["RebuiltRequest", "rebuild_request_at", "rebuild_requests"]


@dataclass(frozen=True, slots=True)
class RebuiltRequest:
    """A request rebuilt from the log, with where it came from."""

    index: int
    """1-based position in send order (among the requests rebuilt)."""
    turn: int | None
    step: int | None
    """The step of a loop request (``None`` for a one-shot call)."""
    boundary_seq: int
    """The seq of its ``step/start`` (loop) or ``compact/start`` (one-shot)."""
    header_seqs: tuple[int, ...]
    """Seqs of the header events this step wrote (empty: header unchanged)."""
    request: LlmRequest
    kind: Literal["loop", "compaction"] = "loop"


def rebuild_requests(
    source: Session | Sequence[Event],
    *,
    session_id: str | None = None,
    one_shots: bool = False,
) -> list[RebuiltRequest]:
    """Every request a log says was sent, in send order.

    Loop requests always; with ``one_shots`` also the compaction summary calls.
    One pass over the log (plus the size of each request built).
    """
    with paused_gc():
        return _rebuild_all(source, session_id, one_shots)


def _rebuild_all(
    source: Session | Sequence[Event], session_id: str | None, one_shots: bool
) -> list[RebuiltRequest]:
    return [
        RebuiltRequest(
            index=walked.index,
            turn=walked.turn,
            step=walked.step,
            boundary_seq=walked.boundary_seq,
            header_seqs=walked.header_seqs,
            request=walked.request(),
            kind=walked.kind,
        )
        for walked in walk_requests(source, session_id=session_id, one_shots=one_shots)
    ]


_ANCHORS = ("step/start", "compact/start")


def rebuild_request_at(
    source: Session | Sequence[Event], boundary_seq: int, *, session_id: str | None = None
) -> LlmRequest:
    """Rebuild the request anchored at ``boundary_seq`` (a ``step/start`` or a
    ``compact/start`` that sent a summary call), from a fresh fold of the log."""
    events = trusted_events(source, session_id)
    if not 0 <= boundary_seq < len(events) or events[boundary_seq].type not in _ANCHORS:
        raise LogError(
            f"seq {boundary_seq} is not a step/start event (nor a compact/start); "
            "no request is anchored there"
        )
    # The walk over the log up to the anchor's own step: the anchor's request
    # depends on nothing after it but the step's header events.
    for walked in walk_requests(events, session_id=session_id, one_shots=True):
        if walked.boundary_seq == boundary_seq:
            return walked.request()
        if walked.boundary_seq > boundary_seq:
            break
    raise LogError(f"the log says the request at seq {boundary_seq} was never sent")
