"""Rebuilding loop requests from a log: the one code path from log to request.

The live loop builds each request with :func:`build_request`; the invariant
checker and ``tapelog requests`` rebuild them with :func:`rebuild_requests` /
:func:`rebuild_request_at`, which fold the same projection
(``Session.derive_nodes`` over a fresh session) and the same header fold.

A loop request is anchored at its ``step/start`` event: its messages are the
projection of the events before it; its header is the fold of every
``request/header*`` event before the step's first provider output (the step's
own header events are written right after ``step/start``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from operator import itemgetter

from tapelog._errors import LogError
from tapelog.llm import wire_for
from tapelog.llm._types import LlmRequest, WireFormat
from tapelog.log import EpochHeader, Event, FrozenDict, Session
from tapelog.log._freeze import concat_frozen
from tapelog.log._header import fold_header_event

__all__ = [
    "RebuiltRequest",
    "build_request",
    "encode_request",
    "rebuild_request_at",
    "rebuild_requests",
]

_STEP_OUTPUT = frozenset({"assistant/chunk", "assistant/message", "step/end", "turn/end"})


def build_request(
    *,
    header: EpochHeader,
    nodes: Sequence[tuple[int, FrozenDict]],
    session_id: str | None,
    boundary_seq: int | None,
    one_shot: bool = False,
) -> LlmRequest:
    """The request for a header and a projected history: prefix first, then history.

    ``nodes`` is ``Session.derive_nodes()`` output (messages already frozen; they
    are not walked again, so building a request costs O(1) per message).
    """
    prefix = header.prefix
    return LlmRequest(
        header=header,
        # Prefix and projected messages are frozen already: no second walk.
        messages=concat_frozen(prefix, map(itemgetter(1), nodes)),
        node_seqs=(*((None,) * len(prefix)), *map(itemgetter(0), nodes)),
        session_id=session_id,
        boundary_seq=boundary_seq,
        one_shot=one_shot,
    )


@dataclass(frozen=True, slots=True)
class RebuiltRequest:
    """A loop request rebuilt from the log, with where it came from."""

    index: int
    """1-based position in send order."""
    turn: int
    step: int
    boundary_seq: int
    header_seqs: tuple[int, ...]
    """Seqs of the header events this step wrote (empty: header unchanged)."""
    request: LlmRequest


def _step_header(
    events: Sequence[Event], boundary: int, header: EpochHeader | None
) -> tuple[EpochHeader | None, tuple[int, ...]]:
    seqs: list[int] = []
    for event in events[boundary + 1 :]:
        if event.type in _STEP_OUTPUT or event.type == "step/start":
            break
        if event.type in ("request/header", "request/header-delta"):
            header = fold_header_event(header, event)
            seqs.append(event.seq)
    return header, tuple(seqs)


def rebuild_request_at(
    events: Sequence[Event], boundary_seq: int, *, session_id: str | None = None
) -> LlmRequest:
    """Rebuild the loop request anchored at the ``step/start`` with ``boundary_seq``.

    Uses a *fresh* Session over the events before the boundary, so no live
    cache can vouch for itself.
    """
    if not 0 <= boundary_seq < len(events) or events[boundary_seq].type != "step/start":
        raise LogError(
            f"seq {boundary_seq} is not a step/start event; no request is anchored there"
        )
    fresh = Session.from_events(events[:boundary_seq], id=session_id)
    header, _ = _step_header(events, boundary_seq, fresh.header)
    if header is None:
        raise LogError(f"step at seq {boundary_seq} has no request header before its output")
    return build_request(
        header=header, nodes=fresh.derive_nodes(), session_id=session_id, boundary_seq=boundary_seq
    )


def rebuild_requests(
    events: Sequence[Event], *, session_id: str | None = None
) -> list[RebuiltRequest]:
    """Every loop request a log implies, in send order (one per ``step/start``).

    One pass: the events are replayed into a single fresh Session, and the
    projection is snapshotted at each boundary, so the cost is proportional to
    the log (plus the size of each request).
    """
    replay = Session(session_id)
    out: list[RebuiltRequest] = []
    for event in events:
        if event.type == "step/start":
            header, seqs = _step_header(events, event.seq, replay.header)
            if header is None:
                raise LogError(f"step at seq {event.seq} has no request header before its output")
            request = build_request(
                header=header,
                nodes=replay.derive_nodes(),
                session_id=session_id,
                boundary_seq=event.seq,
            )
            out.append(
                RebuiltRequest(
                    index=len(out) + 1,
                    turn=event.data["turn"],
                    step=event.data["step"],
                    boundary_seq=event.seq,
                    header_seqs=seqs,
                    request=request,
                )
            )
        replay.replay(event)
    return out


def encode_request(request: LlmRequest, *, wire: WireFormat | None = None) -> bytes:
    """The exact HTTP body of ``request``: the serializer the live loop uses.

    ``wire`` defaults to the wire format of the request's own provider.
    """
    return (wire or wire_for(request.config)).encode_body(request)
