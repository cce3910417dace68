"""One pass over a log, request by request: what was sent and what changed before it.

Every reader that needs the requests a log implies -- the rebuild behind
``tapelog requests``, the cache report, the request diff, the report -- walks
the log with :func:`walk_requests`. It folds the events with the log's own fold
(:class:`tapelog.log.LogFold`: surface, header, cached projection) and yields a
:class:`WalkedRequest` wherever a request was sent:

* a loop request at each ``step/start`` whose step did not end with
  ``step/end {"sent": false}`` (the loop logs that when a step failed before its
  request left: a hook, a listener, the checker, a flush or an abort), and
  unless the step is open at the end of the log with no request header logged
  at all (cut before its first header: it never left). Its
  messages are the projection before the ``step/start``; its header is the
  fold of every header event up to the step's own (logged right after it);
* with ``one_shots=True``, a compaction summary request at each
  ``compact/start`` that names a region, unless its ``compact/end`` says
  ``"sent": false``. Its inputs are the fold at that event plus the region,
  instruction and ``max_tokens`` it logs.

The cost is proportional to the log: each event is visited once, a run of
streamed chunks (other than errors), ``turn/end`` and ``tool/call`` events as
one list of their records, no event made for them
(:func:`tapelog.log._api.iter_event_runs`). A step's
request is made when the step ends (its ``step/end``, the next ``step/start``
or ``turn/start``, or the end of the log), with the history and header taken
at its ``step/start``; a ``step/start``'s payload is read (not frozen) once,
when its request is made, and a ``step/end``'s for ``sent`` alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final, Literal

from tapelog._errors import LogError, TapelogError
from tapelog.log._api import (
    EpochHeader,
    Event,
    History,
    LogFold,
    Session,
    SessionEvents,
    fold_header_event,
    iter_event_runs,
    peek_data,
)
from tapelog.request._request import (
    LlmRequest,
    build_request,
    compaction_inputs,
    summary_request,
)
from tapelog.request._step import HEADER_TYPES, HeaderChange, StepFold

__all__ = [
    "HeaderChange",
    "RequestWalker",
    "WalkedRequest",
    "reading_seq",
    "request_fields",
    "trusted_events",
    "walk_requests",
]


@contextmanager
def reading_seq(seq: int) -> Iterator[None]:
    """Turn an unexpected error while reading the log at ``seq`` into one
    :class:`LogError` that names the seq (audits never end in a traceback)."""
    try:
        yield
    except TapelogError:
        raise
    except Exception as exc:
        raise _unreadable(seq, exc) from exc


def _unreadable(seq: int, exc: Exception) -> LogError:
    return LogError(
        f"seq {seq}: the log holds something this audit cannot read "
        f"({type(exc).__name__}: {exc}); `tapelog verify` says what is wrong with it",
        seq=seq,
    )


@dataclass(frozen=True, slots=True)
class WalkedRequest:
    """One sent request of the walk and what the log did since the one before."""

    index: int
    """1-based position among the walked requests, in send order."""
    kind: Literal["loop", "compaction"]
    turn: int | None
    step: int | None
    boundary_seq: int
    """The seq of the ``step/start`` (loop) or ``compact/start`` (one-shot) it is anchored at."""
    time: int
    """When the request was made (its anchor event's time, epoch ms)."""
    header: EpochHeader
    """The header the request carries (a one-shot's own ``max_tokens`` aside)."""
    header_seqs: tuple[int, ...]
    """Seqs of the header events the step wrote (empty: header unchanged)."""
    changes: tuple[HeaderChange, ...]
    """Header events since the previous request's header (its own step's ones too)."""
    compaction: tuple[Event, ...]
    """``compact/*`` events since the previous request."""
    replaces: tuple[Event, ...]
    """Surface events with a replace op since the previous request."""
    appended: tuple[int, ...]
    """Seqs of surface appends since the previous request."""
    nodes: History
    """The history before the request (an O(1) view: keep it as long as you like)."""
    replaced_since: bool
    """Whether the history changed other than by appends since the previous request."""
    message: Event | None
    """The step's ``assistant/message`` (``None`` if the step logged none, and for one-shots)."""
    failed_attempts: int
    """Attempts that ended in a logged ``error`` chunk before the one that answered."""
    session_id: str | None
    one_shot: tuple[list[int], str, int] | None = None
    """A compaction's ``(region, instruction, max_tokens)``."""

    def request(self) -> LlmRequest:
        """The request itself, built by the very functions the loop and compaction use."""
        if self.one_shot is None:
            return build_request(
                header=self.header,
                nodes=self.nodes,
                session_id=self.session_id,
                boundary_seq=self.boundary_seq,
            )
        region, instruction, max_tokens = self.one_shot
        return summary_request(
            header=self.header,
            nodes=self.nodes,
            region=region,
            instruction=instruction,
            max_tokens=max_tokens,
            session_id=self.session_id,
            anchor_seq=self.boundary_seq,
        )


def trusted_events(
    source: Session | Sequence[Event], session_id: str | None = None
) -> Sequence[Event]:
    """The events of a session, or of a plain list after validating it.

    A ``Session`` (and its ``events`` view) was validated event by event when
    it was appended to or loaded; any other list is replayed through a fresh
    ``Session`` first, so a walk never folds what the loop could not have logged.
    """
    if isinstance(source, Session):
        return source.events
    if isinstance(source, SessionEvents):
        return source
    return Session.from_events(source, id=session_id).events


def _one_shot_sent(events: Sequence[Event], start: Event) -> bool:
    cid = start.data.get("id")
    for seq in range(start.seq + 1, len(events)):
        event = events[seq]
        if event.type == "compact/end" and event.data.get("id") == cid:
            return event.data.get("sent") is not False
    return True  # cut short by a crash: the call may have gone out


class _Since:
    """What the log did since the last request: header changes, ``compact/*``
    events, surface replaces and appends (a request carries them)."""

    __slots__ = ("appended", "changes", "compaction", "replaces")

    def __init__(self) -> None:
        self.changes: list[HeaderChange] = []
        self.compaction: list[Event] = []
        self.replaces: list[Event] = []
        self.appended: list[int] = []

    def then(self, step: list[HeaderChange], later: _Since) -> None:
        """Keep this, then ``step``'s header changes, then ``later`` (a step that
        was not sent: what it saw counts for the next request)."""
        self.changes += step
        self.changes += later.changes
        self.compaction += later.compaction
        self.replaces += later.replaces
        self.appended += later.appended


class _Pending:
    """A step whose request is known once the step ends (its ``step/end``, the
    next ``step/start`` or ``turn/start``, or the end of the log): its fold,
    and what was true at its ``step/start``."""

    __slots__ = ("fold", "nodes", "settled", "since", "start")

    def __init__(self, start: Event, fold: StepFold, nodes: History, since: _Since) -> None:
        self.start = start
        self.fold = fold
        self.nodes = nodes
        self.since = since
        self.settled = False
        """Decided ahead of its end (a one-shot call logged inside the step)."""


_NONE: tuple[WalkedRequest, ...] = ()
_NO_DATA: Final[Mapping[str, Any]] = {}
_COMPACT_TYPES: Final = frozenset({"compact/start", "compact/summary", "compact/end"})


class _Walker:
    """The walk's state between events: the fold, what changed since the last
    request, and the step whose request waits for the step's end.

    Each event is visited once, in seq order: a step's events are fed to its
    :class:`StepFold` as they come, and its request is made when the step ends
    (only a one-shot call logged inside an open step reads that step ahead)."""

    def __init__(self, events: Sequence[Event], session_id: str | None, one_shots: bool) -> None:
        self.events = events
        self.session_id = session_id
        self.one_shots = one_shots
        self.fold = LogFold()
        self.consumed: set[int] = set()
        """Header events of steps read ahead: already theirs."""
        self.index = 0
        self.since = _Since()
        self.pending: _Pending | None = None

    def visit(self, event: Event) -> tuple[WalkedRequest, ...]:
        """Fold ``event``; the requests it lets the walk make (a step's at its
        end; a one-shot's at its ``compact/start``), in send order."""
        etype = event.type
        pending = self.pending
        if etype == "assistant/chunk":  # half of a log: a step's output, nothing more
            if pending is not None:
                pending.fold.feed_chunk(event)
            self.fold.apply(event)
            return _NONE
        out = _NONE
        own = False  # a header event of the open step's own header
        if pending is not None:
            step = pending.fold
            fed = step.feed(event)
            own = fed and etype in HEADER_TYPES and event.seq in step.header_seqs[-1:]
            if step.closed:
                out = self._close(pending)
        if etype == "step/start":
            self._open(event)
        elif etype in HEADER_TYPES and not own and event.seq not in self.consumed:
            after = fold_header_event(self.fold.header, event)
            assert after is not None
            self.since.changes.append(HeaderChange(event, self.fold.header, after))
        elif etype == "compact/start" and self.one_shots:
            out = (*out, *self._one_shot(event))
        since = self.since
        if etype in _COMPACT_TYPES:
            since.compaction.append(event)
        if event.surface_op is not None:
            if event.surface_op == "append":
                since.appended.append(event.seq)
            else:
                since.replaces.append(event)
        self.fold.apply(event)
        return out

    def run(self, records: list[bytes], type_at: Callable[[int], str]) -> None:
        """:meth:`visit` a run of events given as their records
        (:func:`tapelog.log._api.iter_event_runs`): chunks other than errors,
        ``turn/end``, ``tool/call`` ... Nothing of the walk changes for them,
        but an open step still reading its header events learns where they end
        (its first chunk, as a rule): the run's types (``type_at(seq)``, all
        it reads of them) are fed to it one by one until then."""
        pending = self.pending
        if pending is not None and pending.fold.in_header:
            step, first = pending.fold, self.fold.folded
            for seq in range(first, first + len(records)):
                step.feed_data(type_at(seq), _NO_DATA)
                if not step.in_header:
                    break
        self.fold.apply_records(records)

    def finish(self) -> tuple[WalkedRequest, ...]:
        """The end of the log: the request of a step still open, if it left."""
        pending = self.pending
        return _NONE if pending is None else self._close(pending)

    def _open(self, event: Event) -> None:
        fold = self.fold
        self.pending = _Pending(event, StepFold(event.seq, fold.header), fold.history(), self.since)
        self.since = _Since()

    def _close(self, pending: _Pending) -> tuple[WalkedRequest, ...]:
        self.pending = None
        if pending.settled:
            return _NONE
        step = pending.fold
        if not step.sent:
            # Not sent: its header events still change the header the next
            # request carries, so they count as changes before that one.
            pending.since.then(step.changes, self.since)
            self.since = pending.since
            return _NONE
        start = pending.start
        if step.header is None:
            raise LogError(
                f"seq {start.seq}: the request of this step/start has no request header "
                "before its output; the log is not a loop session or was cut before "
                "its first header",
                seq=start.seq,
            )
        data = peek_data(start)
        since = pending.since
        return (
            self._walked(
                start,
                since,
                pending.nodes,
                kind="loop",
                turn=data["turn"],
                step=data["step"],
                header=step.header,
                header_seqs=tuple(step.header_seqs),
                changes=(*since.changes, *step.changes),
                message=step.message,
                failed_attempts=step.failed_attempts,
            ),
        )

    def _settle(self, at: Event) -> tuple[WalkedRequest, ...]:
        """Decide the open step's request now, reading the step ahead from
        ``at`` (a one-shot call inside it goes out after it)."""
        pending = self.pending
        if pending is None or pending.settled:
            return _NONE
        ahead = pending.fold.copy()
        events = self.events
        for seq in range(at.seq + 1, len(events)):
            if not ahead.feed(events[seq]) or ahead.closed:
                break
        self.consumed.update(ahead.header_seqs)
        settled = _Pending(pending.start, ahead, pending.nodes, pending.since)
        pending.settled = True
        out = self._close(settled)
        self.pending = pending  # still fed: its end is where it ends
        return out

    def _one_shot(self, event: Event) -> tuple[WalkedRequest, ...]:
        inputs = compaction_inputs(event.data)
        if inputs is None or not _one_shot_sent(self.events, event):
            return _NONE
        before = self._settle(event)
        header = self.fold.header
        if header is None:
            raise LogError(
                f"seq {event.seq}: this compaction names a region to summarise, but no "
                "request header is logged before it",
                seq=event.seq,
            )
        since, self.since = self.since, _Since()
        walked = self._walked(
            event,
            since,
            self.fold.history(),
            kind="compaction",
            turn=event.data.get("turn"),
            step=None,
            header=header,
            header_seqs=(),
            changes=tuple(since.changes),
            message=None,
            failed_attempts=0,
            one_shot=inputs,
        )
        return (*before, walked)

    def _walked(self, anchor: Event, since: _Since, nodes: History, **fields: Any) -> WalkedRequest:
        """The next request, anchored at ``anchor``, with what changed since the last one."""
        self.index += 1
        return WalkedRequest(
            index=self.index,
            boundary_seq=anchor.seq,
            time=anchor.time,
            compaction=tuple(since.compaction),
            replaces=tuple(since.replaces),
            appended=tuple(since.appended),
            nodes=nodes,
            replaced_since=bool(since.replaces),
            session_id=self.session_id,
            **fields,
        )


class RequestWalker(_Walker):
    """The walk fed one event at a time, for a log that is still growing (the
    proxy's live cache audit): :meth:`visit` each new event in seq order; a
    step's request comes back from the event that ends the step."""


def walk_requests(
    source: Session | Sequence[Event],
    *,
    session_id: str | None = None,
    one_shots: bool = False,
) -> Iterator[WalkedRequest]:
    """Every request a log says was sent, in send order (see the module docstring)."""
    if isinstance(source, Session):
        session_id = session_id or source.id
    events = trusted_events(source, session_id)
    walker = _Walker(events, session_id, one_shots)
    seq = -1
    try:
        # A session's view hands over runs of events the walk reads the type
        # of alone as records (most of a long log: no event made for them);
        # any other view, each of its events.
        if type(events) is SessionEvents:
            runs, type_at = iter_event_runs(events.items), events.type_at
        else:
            runs, type_at = iter(events), lambda seq: events[seq].type
        for event in runs:
            if isinstance(event, list):
                walker.run(event, type_at)
                seq += len(event)
                continue
            seq = event.seq
            walked = walker.visit(event)
            if walked:
                yield from walked
        yield from walker.finish()
    except TapelogError:
        raise
    except Exception as exc:  # what reading_seq does, without a context per event
        raise _unreadable(seq, exc) from exc


def request_fields(request: WalkedRequest) -> dict[str, Any]:
    """The fields that name a walked request in every audit row, in order."""
    config = request.header.config
    return {
        "index": request.index,
        "turn": request.turn,
        "step": request.step,
        "seq": request.boundary_seq,
        "provider": config.provider,
        "model": config.model,
    }
