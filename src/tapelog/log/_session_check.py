"""Checking one event against a log's fold before it is committed.

What every event must satisfy whatever else the log holds (payload shape,
surface op against the surface, source seqs, the header fold), apart from the
structural rules of :class:`tapelog.log._rules.LogRules`, which ``Session``
checks after this. Kept apart from ``_session`` so that module holds the
append, replay and locking paths, and this the judgement they share.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tapelog._errors import EventError
from tapelog.log._events import (
    SURFACE_TYPES,
    Event,
    PackedEvent,
    check_payload,
    pack_logged,
)
from tapelog.log._fold import LogFold
from tapelog.log._freeze import FrozenDict, FrozenList, freeze
from tapelog.log._header import EpochHeader, fold_header_event
from tapelog.log._surface import parse_surface_op

__all__ = ["check_event", "packed"]


def packed(event: Event) -> Event:
    """A validated event of :data:`PACKED_TYPES` as a :class:`PackedEvent` (its record)."""
    if type(event) is PackedEvent or event.surface_op is not None:
        return event
    return pack_logged(event)


def check_event(
    fold: LogFold,
    *,
    seq: int,
    time: int,
    etype: str,
    data: Mapping[str, Any],
    surface_op: Any,
    source_seqs: Any,
    event: Event | None = None,
) -> tuple[Event, EpochHeader | None, FrozenDict]:
    """Check one event against the log so far (payload, surface op, source
    seqs, header fold); return it with the header after it and its payload.

    ``event`` is the already-built event when replaying; it is returned as
    it is when it passes (no second copy on the load path).
    """
    if not isinstance(etype, str):
        raise EventError(f"event type must be a string, got {etype!r}")
    if type(data) is not FrozenDict and not isinstance(data, Mapping):
        raise EventError(f"{etype}: data must be a JSON object")
    frozen = freeze(data, path="data")
    check_payload(etype, frozen)
    is_surface = etype in SURFACE_TYPES
    if is_surface and surface_op is None:
        raise EventError(f"{etype} is a surface event and needs a surface_op")
    if not is_surface and surface_op is not None:
        raise EventError(f"{etype} is not a surface event and must not carry a surface_op")
    if not is_surface and source_seqs is not None:
        raise EventError(f"{etype} is not a surface event and must not carry source_seqs")
    op = None
    if is_surface:
        op = parse_surface_op(surface_op)
        fold.surface.check(op, etype, frozen, lambda s: (fold.events[s].type, fold.events[s].data))
    seqs: FrozenList | None = None
    if source_seqs is not None:
        seqs = (
            source_seqs
            if type(source_seqs) is FrozenList
            else freeze(list(source_seqs), path="source_seqs")
        )
        for s in seqs:
            if type(s) is not int or not 0 <= s < seq:
                raise EventError(
                    f"{etype}: source_seqs must name earlier events, got {s!r} at seq {seq}"
                )
    header_after = fold.header
    if etype in ("request/header", "request/header-delta"):
        probe = Event(seq=seq, time=time, type=etype, data=frozen)
        header_after = fold_header_event(header_after, probe)
    if not (
        event is not None
        and event.data is frozen
        and event.source_seqs is seqs
        and (surface_op is None or type(surface_op) is str or type(surface_op) is FrozenDict)
    ):
        event = Event(
            seq=seq,
            time=time,
            type=etype,
            data=frozen,
            surface_op=None if surface_op is None else freeze(surface_op, path="surface_op"),
            source_seqs=seqs,
        )
    return event, header_after, frozen
