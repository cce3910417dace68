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

from collections.abc import Iterator, Sequence
from itertools import islice
from typing import overload

from tapelog.log._events import Event, PackedEvent
from tapelog.log._freeze import FrozenDict
from tapelog.log._header import EpochHeader, fold_header_event
from tapelog.log._projection import derive_event_message
from tapelog.log._record_blocks import RecordBlock
from tapelog.log._session_info import SessionEvents
from tapelog.log._surface import Surface, parse_surface_op

__all__ = ["History", "LogFold"]

_HEADER_TYPES = frozenset({"request/header", "request/header-delta"})


class History(Sequence[tuple[int, FrozenDict]]):
    """The projected history at one point of a log, as ``(seq, message)`` pairs.

    An O(1) view over the first ``len(self)`` entries of a fold's message and
    seq lists. A fold only ever appends to those lists (a replace starts new
    ones), so a view never changes after it is made, and one view
    :meth:`extends` another when both share the lists: the cheap proof that
    one request's history is an append-extension of an earlier one's.
    """

    __slots__ = ("_count", "messages", "seqs")

    def __init__(self, seqs: list[int], messages: list[FrozenDict], count: int) -> None:
        self.seqs = seqs
        self.messages = messages
        self._count = count

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> tuple[int, FrozenDict]: ...
    @overload
    def __getitem__(self, index: slice) -> list[tuple[int, FrozenDict]]: ...
    def __getitem__(
        self, index: int | slice
    ) -> tuple[int, FrozenDict] | list[tuple[int, FrozenDict]]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._count))]
        if index < 0:
            index += self._count
        if not 0 <= index < self._count:
            raise IndexError("history index out of range")
        return self.seqs[index], self.messages[index]

    def __iter__(self) -> Iterator[tuple[int, FrozenDict]]:
        count = self._count
        return zip(islice(self.seqs, count), islice(self.messages, count), strict=True)

    def message_list(self) -> list[FrozenDict]:
        """The messages, as a new list (one C-level copy)."""
        messages = self.messages
        return messages[:] if len(messages) == self._count else messages[: self._count]

    def seq_list(self) -> list[int]:
        """The seqs, as a new list (one C-level copy)."""
        seqs = self.seqs
        return seqs[:] if len(seqs) == self._count else seqs[: self._count]

    def extends(self, other: History) -> bool:
        """Whether ``other`` is a prefix of this history (O(1): the same lists)."""
        return other.seqs is self.seqs and other._count <= self._count

    def __repr__(self) -> str:
        return f"<History of {self._count} messages>"


class LogFold:
    """Surface, header and cached projection of a log, fed one event at a time."""

    __slots__ = (
        "_events",
        "_folded",
        "_header",
        "_messages",
        "_projected",
        "_projected_gen",
        "_seqs",
        "_shared",
        "surface",
    )

    def __init__(self, log: list[Event | bytes | RecordBlock] | None = None) -> None:
        # A packed event is kept as its record (see PackedEvent), any other as itself.
        # Given ``log`` (a session's own item list), the fold reads its events
        # there and keeps no list of its own: it folds them one by one all the
        # same (the checker's shadow, see Session.shadow_fold).
        self._shared = log is not None
        self._events: list[Event | bytes | RecordBlock] = [] if log is None else log
        self._folded = 0  # of a fold over a session's list (else len(_events))
        self.surface = Surface()
        self._header: EpochHeader | None = None
        self._messages: list[FrozenDict] = []
        self._seqs: list[int] = []
        self._projected = 0
        self._projected_gen = 0

    @property
    def events(self) -> SessionEvents:
        """The folded events, as a read-only live view (a packed event is made
        from its record when read); of a fold that reads a session's list, a
        copy of the folded ones."""
        if self._shared:
            return SessionEvents(self._events[: self._folded])
        return SessionEvents(self._events)

    @property
    def folded(self) -> int:
        """How many events were folded (the seq of the next one)."""
        # An own list may grow by records a load appends directly (Session._replay_many).
        return self._folded if self._shared else len(self._events)

    @property
    def items(self) -> list[Event | bytes | RecordBlock]:
        """The fold's own list: each event, or a packed event's record (do not modify)."""
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

    def apply_records(self, records: list[bytes]) -> None:
        """Fold a run of packed events' records at the next seqs, of events that
        change neither surface nor header (streamed chunks: the request walk's
        runs, see :func:`tapelog.log._peek.iter_event_runs`)."""
        if self._shared:
            self._folded += len(records)
        else:
            self._events += records

    def apply_folded(self, event: Event, header: EpochHeader | None) -> None:
        """Fold one event whose header fold the caller computed already
        (``Session`` does while validating it)."""
        if self._shared:
            self._folded += 1
        else:
            self._events.append(event._record if type(event) is PackedEvent else event)
        if event.surface_op is not None:
            self.surface.apply(event.seq, parse_surface_op(event.surface_op))
        self._header = header

    def _project(self) -> None:
        surface = self.surface
        if self._projected_gen != surface.replace_generation:
            # New lists: histories handed out keep the old ones, unchanged.
            self._messages = []
            self._seqs = []
            self._projected = 0
            self._projected_gen = surface.replace_generation
        events = self._events
        messages, seqs = self._messages, self._seqs
        for seq in surface.nodes_from(self._projected):
            event = events[seq]  # a surface event: never packed
            assert isinstance(event, Event)
            message = derive_event_message(event)
            if message is not None:
                messages.append(message)
                seqs.append(seq)
        self._projected = len(surface)

    def copy(self, log: list[Event | bytes | RecordBlock] | None = None) -> LogFold:
        """An independent fold at the same point, projected, sharing the frozen
        events and messages (lists of references are copied, nothing re-derived).
        Given ``log``, the list this fold's events are the start of, the copy
        reads its events there (see ``__init__``)."""
        self._project()
        out = LogFold(log)
        folded = self.folded
        if log is None:
            out._events = self._events[:folded]
        out._folded = folded
        out.surface = self.surface.copy()
        out._header = self._header
        out._messages, out._seqs = self._messages[:], self._seqs[:]
        out._projected, out._projected_gen = self._projected, self._projected_gen
        return out

    def history(self) -> History:
        """The projected history now, as an O(1) view that never changes."""
        self._project()
        return History(self._seqs, self._messages, len(self._seqs))

    def messages(self) -> list[FrozenDict]:
        """The model-visible history: a fresh list over shared frozen messages."""
        return self.history().message_list()

    def nodes(self) -> list[tuple[int, FrozenDict]]:
        """Like :meth:`messages`, paired with each message's event seq."""
        return list(self.history())
