"""The log's fold: surface, request header and projected history, kept incrementally.

Every reader of a log needs the same three things at some position: which events
are surface nodes, which request header is in force, and the model-visible
messages the surface projects to. :class:`LogFold` is the one implementation:
``Session`` keeps one behind its validated appends, and the request walk, the
rebuild and the invariant checker's shadow each keep their own over events that
were validated when they were logged or loaded. Folding does not validate; it
trusts its input to be a log ``Session`` accepted.

The projection is cached per surface node (each node projected once, when first
asked for) and rebuilt only when a replace bumps ``replace_generation``, so a
fold costs what is new.
"""

from __future__ import annotations

from collections.abc import Sequence

from tapelog.log._events import Event
from tapelog.log._freeze import FrozenDict
from tapelog.log._header import EpochHeader, fold_header_event
from tapelog.log._projection import derive_event_message
from tapelog.log._surface import Surface, parse_surface_op

__all__ = ["LogFold"]

_HEADER_TYPES = frozenset({"request/header", "request/header-delta"})


class LogFold:
    """Surface, header and cached projection of a log, fed one event at a time."""

    __slots__ = (
        "_events",
        "_header",
        "_messages",
        "_nodes",
        "_projected",
        "_projected_gen",
        "surface",
    )

    def __init__(self) -> None:
        self._events: list[Event] = []
        self.surface = Surface()
        self._header: EpochHeader | None = None
        self._messages: list[FrozenDict] = []
        self._nodes: list[tuple[int, FrozenDict]] = []
        self._projected = 0
        self._projected_gen = 0

    @property
    def events(self) -> list[Event]:
        """The folded events (the fold's own list: do not modify)."""
        return self._events

    @property
    def header(self) -> EpochHeader | None:
        """The request header in force after the folded events."""
        return self._header

    @property
    def replace_generation(self) -> int:
        return self.surface.replace_generation

    def apply(self, event: Event) -> None:
        """Fold one event at the next seq."""
        header = self._header
        if event.type in _HEADER_TYPES:
            header = fold_header_event(header, event)
        self.apply_folded(event, header)

    def apply_folded(self, event: Event, header: EpochHeader | None) -> None:
        """Fold one event whose header fold the caller computed already
        (``Session`` does while validating it)."""
        self._events.append(event)
        if event.surface_op is not None:
            self.surface.apply(event.seq, parse_surface_op(event.surface_op))
        self._header = header

    def _project(self) -> None:
        surface = self.surface
        if self._projected_gen != surface.replace_generation:
            self._messages = []
            self._nodes = []
            self._projected = 0
            self._projected_gen = surface.replace_generation
        events = self._events
        for seq in surface.nodes_from(self._projected):
            message = derive_event_message(events[seq])
            if message is not None:
                self._messages.append(message)
                self._nodes.append((seq, message))
        self._projected = len(surface)

    def messages(self) -> list[FrozenDict]:
        """The model-visible history: a fresh list over shared frozen messages."""
        self._project()
        return list(self._messages)

    def nodes(self) -> list[tuple[int, FrozenDict]]:
        """Like :meth:`messages`, paired with each message's event seq."""
        self._project()
        return list(self._nodes)

    def live_nodes(self) -> Sequence[tuple[int, FrozenDict]]:
        """:meth:`nodes` without the copy: the fold's own list, which later
        appends extend (a replace starts a new one). For walkers that read it
        before folding further; copy it to keep it."""
        self._project()
        return self._nodes
