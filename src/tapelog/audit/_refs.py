"""One pass over a log, request by request, with what changed between requests.

The cache report and the request diff both need, for every loop request, its
header, its projected history and the logged events that changed either since
the request before it. :func:`walk_requests` computes them in a single pass
whose cost is proportional to the log: the history is the fold of
:func:`tapelog.log.derive_event_message` over the surface (each node projected
once, as ``Session.derive_nodes`` does), and the header is the fold of the
header events, exactly as ``rebuild_requests`` anchors a request at its
``step/start``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from tapelog._errors import LogError
from tapelog.log import EpochHeader, Event, FrozenDict, derive_event_message
from tapelog.log._header import fold_header_event
from tapelog.log._surface import Surface, parse_surface_op

__all__ = ["HeaderChange", "LoopRequest", "RequestRef", "ref_fields", "walk_requests"]

_HEADER = frozenset({"request/header", "request/header-delta"})
_STEP_OUTPUT = frozenset({"assistant/chunk", "assistant/message", "step/end", "turn/end"})


@dataclass(frozen=True, slots=True)
class HeaderChange:
    """A header event and the headers folded just before and after it."""

    event: Event
    before: EpochHeader | None
    after: EpochHeader


@dataclass(frozen=True, slots=True)
class LoopRequest:
    """One loop request of the walk and what the log did since the one before.

    ``nodes`` is the walker's live history list: read it during the iteration
    that yielded this request (copy it to keep it).
    """

    index: int
    turn: int
    step: int
    boundary_seq: int
    header: EpochHeader
    header_seqs: tuple[int, ...]
    changes: tuple[HeaderChange, ...]
    """Header events since the previous request's header (its own step's ones too)."""
    compaction: tuple[Event, ...]
    """``compact/*`` events since the previous boundary."""
    replaces: tuple[Event, ...]
    """Surface events with a replace op since the previous boundary."""
    appended: tuple[int, ...]
    """Seqs of surface appends since the previous boundary."""
    nodes: Sequence[tuple[int, FrozenDict]]
    replaced_since: bool
    """Whether the history changed other than by appends since the previous request."""
    message: Event | None
    """The step's ``assistant/message`` (``None`` if the step logged none)."""
    failed_attempts: int
    """Attempts that ended in a logged ``error`` chunk before the one that answered."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestRef:
    """The fields that name a loop request in every audit row (cache report, diff).

    Both outputs lead with them, in this order, so one request reads the same
    in ``tapelog cache --json`` and ``tapelog diff --json`` (docs/cli.md).
    """

    index: int
    turn: int
    step: int
    seq: int
    """The seq of the request's ``step/start``."""
    provider: str
    model: str

    def ref_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "turn": self.turn,
            "step": self.step,
            "seq": self.seq,
            "provider": self.provider,
            "model": self.model,
        }


def ref_fields(request: LoopRequest) -> dict[str, Any]:
    """The :class:`RequestRef` fields of a walked request, for a row's constructor."""
    config = request.header.config
    return {
        "index": request.index,
        "turn": request.turn,
        "step": request.step,
        "seq": request.boundary_seq,
        "provider": config.provider,
        "model": config.model,
    }


def walk_requests(events: Sequence[Event]) -> Iterator[LoopRequest]:
    """Every loop request of a well-formed log, in send order (one per ``step/start``)."""
    surface = Surface()
    messages: dict[int, FrozenDict | None] = {}
    nodes: list[tuple[int, FrozenDict]] = []
    folded: EpochHeader | None = None
    consumed: set[int] = set()
    changes: list[HeaderChange] = []
    compaction: list[Event] = []
    replaces: list[Event] = []
    appended: list[int] = []
    index = 0
    for event in events:
        etype = event.type
        if etype == "step/start":
            index += 1
            request = _request_at(events, event, index, folded, changes)
            consumed.update(request.header_seqs)
            folded = request.header
            yield LoopRequest(
                index=index,
                turn=event.data["turn"],
                step=event.data["step"],
                boundary_seq=event.seq,
                header=request.header,
                header_seqs=request.header_seqs,
                changes=request.changes,
                compaction=tuple(compaction),
                replaces=tuple(replaces),
                appended=tuple(appended),
                nodes=nodes,
                replaced_since=bool(replaces),
                message=request.message,
                failed_attempts=request.failed_attempts,
            )
            changes, compaction, replaces, appended = [], [], [], []
        elif etype in _HEADER:
            if event.seq not in consumed:
                after = fold_header_event(folded, event)
                assert after is not None
                changes.append(HeaderChange(event, folded, after))
                folded = after
        elif etype.startswith("compact/"):
            compaction.append(event)
        if event.surface_op is None:
            continue
        op = parse_surface_op(event.surface_op)
        surface.apply(event.seq, op)
        message = messages[event.seq] = derive_event_message(event)
        if op is None:
            appended.append(event.seq)
            if message is not None:
                nodes.append((event.seq, message))
        else:
            replaces.append(event)
            # A new list: the previous request's (already yielded) list stays as it was.
            nodes = [(s, m) for s in surface.nodes if (m := messages[s]) is not None]


@dataclass(frozen=True, slots=True)
class _Step:
    header: EpochHeader
    header_seqs: tuple[int, ...]
    changes: tuple[HeaderChange, ...]
    message: Event | None
    failed_attempts: int


def _request_at(
    events: Sequence[Event],
    start: Event,
    index: int,
    folded: EpochHeader | None,
    pending: list[HeaderChange],
) -> _Step:
    """Look ahead through one step: its header events, its answer, its failed attempts."""
    header = folded
    seqs: list[int] = []
    changes = list(pending)
    message: Event | None = None
    failed = 0
    in_header = True
    for seq in range(start.seq + 1, len(events)):
        event = events[seq]
        if event.type == "step/start":
            break
        if event.type in _STEP_OUTPUT:
            in_header = False
        if in_header and event.type in _HEADER:
            after = fold_header_event(header, event)
            assert after is not None
            changes.append(HeaderChange(event, header, after))
            header = after
            seqs.append(seq)
        elif event.type == "assistant/message":
            message = event
        elif event.type == "assistant/chunk" and event.data["chunk"].get("kind") == "error":
            failed += 1
    if header is None:
        raise LogError(
            f"request {index} (step/start at seq {start.seq}) has no request header before "
            "its output; the log is not a loop session or was cut before its first header."
        )
    return _Step(header, tuple(seqs), tuple(changes), message, failed)
