"""The step boundary: which header a step's request carries.

A step's request is anchored at its ``step/start``: its messages are the
projection of the events before it, and its header is the header in force
there folded with the header events the step logs right after it, before its
output (docs/architecture.md, "Invariants"). The pre-send checker (rebuilding
the request about to leave) and the request walk (every audit, reading a log)
both take that header from :func:`fold_step`, so the rule has one encoding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from tapelog.log._events import Event
from tapelog.log._header import EpochHeader, fold_header_event

__all__ = ["HeaderChange", "StepHeader", "fold_step"]

_HEADER: Final = frozenset({"request/header", "request/header-delta"})
_OUTPUT: Final = frozenset({"assistant/chunk", "assistant/message", "step/end", "turn/end"})
"""A step's output (or its end): header events after it join the next request."""
_NEXT: Final = frozenset({"step/start", "turn/start"})


@dataclass(frozen=True, slots=True)
class HeaderChange:
    """A header event and the headers folded just before and after it."""

    event: Event
    before: EpochHeader | None
    after: EpochHeader


@dataclass(frozen=True, slots=True)
class StepHeader:
    """The header a step's request carries and the header events that made it."""

    header: EpochHeader | None
    """``None``: no header is logged before the step's output (no request left)."""
    changes: tuple[HeaderChange, ...]
    """The step's own header events, in order."""
    stop: int
    """The seq of the first event after the step's header events that is not one
    (its first output, its end, the next step or turn), or the log's length."""


def fold_step(events: Sequence[Event], start: int, before: EpochHeader | None) -> StepHeader:
    """The header of the step whose ``step/start`` is ``events[start]``, given
    the header ``before`` it (see the module docstring). Costs the events up
    to the step's first output."""
    header = before
    changes: list[HeaderChange] = []
    for seq in range(start + 1, len(events)):
        event = events[seq]
        etype = event.type
        if etype in _OUTPUT or etype in _NEXT:
            return StepHeader(header, tuple(changes), seq)
        if etype in _HEADER:
            after = fold_header_event(header, event)
            assert after is not None
            changes.append(HeaderChange(event, header, after))
            header = after
    return StepHeader(header, tuple(changes), len(events))
