"""Streaming a turn to the caller: typed events translated from the log.

``Agent.stream(prompt)`` runs ``Agent.run(prompt)`` in a task and listens to
the session (:meth:`Session.subscribe`). Every event the turn commits that a
caller cares about becomes one frozen dataclass carrying the ``seq`` of the
log event it came from, in log order, so what the caller sees is what the log
says -- never what the provider sent before the log took it:

=====================================  =====================================
log event                              stream event
=====================================  =====================================
``assistant/chunk`` ``text``           :class:`TextDelta`
``assistant/chunk`` ``reasoning``      :class:`ReasoningDelta`
``assistant/chunk`` ``error``          :class:`AttemptFailed` (a retry, or an
                                       overflow that compaction answers)
``assistant/message``                  :class:`MessageEvent` (authoritative)
``tool/call``                          :class:`ToolCallEvent`
``tool/result``                        :class:`ToolResultEvent`
``step/end``                           :class:`StepEnd`
``turn/end``                           :class:`TurnEnd` (with the ``TurnResult``)
=====================================  =====================================

Tool-call argument pieces are not streamed: a call counts once it is logged
as ``tool/call`` (before it runs); a call cut by ``max_tokens`` or an abort
never runs and stays in the chunks only. Signatures, usage and finish chunks
live in the :class:`MessageEvent`.

Listeners run on the appending thread inside the session lock and must not
append or block: the listener only puts the event on a deque (ordered by the
lock even when a tool thread appends) and wakes the consumer, thread-safely
when it is not the loop's thread. Translation happens on the consumer side.
The turn is not paced by the consumer: events wait in memory (they are the
logged objects, not copies) until they are read.

Stopping early -- ``break`` (the generator is closed when it is collected,
at once in CPython), ``aclose()``, or the consumer's task being cancelled --
aborts the turn (``turn/end {"kind": "aborted", "by": "stream-closed"}``) and
waits for it to close its log before the close returns. A turn that raises
ends the stream with its :class:`TurnEnd` (reason ``error``) and then the
exception.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import AsyncGenerator, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from tapelog.agent._turn import TurnResult, final_text
from tapelog.log._api import Event, FrozenDict, FrozenList

if TYPE_CHECKING:
    from tapelog.agent._loop import Agent

__all__ = [
    "STREAM_CLOSED",
    "AttemptFailed",
    "MessageEvent",
    "ReasoningDelta",
    "StepEnd",
    "StreamEvent",
    "TextDelta",
    "ToolCallEvent",
    "ToolResultEvent",
    "TurnEnd",
    "stream_turn",
]

STREAM_CLOSED: Final = "stream-closed"
"""The ``by`` of a turn aborted because its stream was closed before it ended."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamEvent:
    """What every stream event has: the log event it came from and its turn."""

    seq: int
    turn: int


@dataclass(frozen=True, slots=True, kw_only=True)
class TextDelta(StreamEvent):
    """A piece of answer text, as logged (``assistant/chunk`` of kind ``text``)."""

    step: int
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ReasoningDelta(StreamEvent):
    """A piece of the model's reasoning, as logged (``assistant/chunk`` of kind ``reasoning``)."""

    step: int
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptFailed(StreamEvent):
    """An attempt of the step failed (the loop's ``error`` chunk).

    The deltas the step streamed so far are not part of its answer: with
    ``retry_in_ms`` the same request is sent again, with ``overflow`` the
    step ends and compaction follows. The :class:`MessageEvent` says what the
    step's answer is.
    """

    step: int
    attempt: int
    status: int | None
    message: str
    retry_in_ms: int | None
    overflow: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageEvent(StreamEvent):
    """The step's one ``assistant/message``: its answer, the authority over the deltas.

    Empty and ``interrupted`` when no answer came (the provider failed, the
    request was never sent); ``interrupted`` with what arrived on an abort.
    """

    step: int
    content: FrozenList
    usage: FrozenDict | None
    interrupted: bool

    @property
    def text(self) -> str:
        """The text blocks joined (what the text deltas of the answer add up to)."""
        return final_text(self.content)

    @property
    def reasoning(self) -> str:
        """The reasoning blocks' text joined."""
        return "".join(b.get("text", "") for b in self.content if b["type"] == "reasoning")


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallEvent(StreamEvent):
    """A tool call, logged before the tool runs (``arguments``: the model's raw JSON text)."""

    step: int
    call_id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResultEvent(StreamEvent):
    """A tool call's result as the model will see it (``error``: not shown to the model)."""

    step: int
    call_id: str
    content: str | FrozenList
    is_error: bool
    error: str | FrozenDict | None


@dataclass(frozen=True, slots=True, kw_only=True)
class StepEnd(StreamEvent):
    """A step ended; ``sent`` is false when its request never left (``error`` says why)."""

    step: int
    sent: bool
    error: FrozenDict | None


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnEnd(StreamEvent):
    """The turn ended (always the last event): the logged reason and the turn's result."""

    reason: FrozenDict
    result: TurnResult


_TRANSLATED: Final = frozenset(
    {"assistant/chunk", "assistant/message", "tool/call", "tool/result", "step/end", "turn/end"}
)


class _Feed:
    """The session listener: hands the turn's events to the consumer, in log order."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.thread = threading.get_ident()
        self.pending: deque[Event] = deque()
        self.wake = asyncio.Event()
        self.task: asyncio.Task[TurnResult] | None = None
        self.started = False  # our turn/start was seen

    def listen(self, event: Event) -> None:
        """Called inside the session lock: never appends, blocks or raises."""
        etype = event.type
        on_loop = threading.get_ident() == self.thread
        if etype == "turn/start":
            # Ours only when our task appended it (another turn's start is not).
            if self.started or not on_loop or asyncio.current_task(self.loop) is not self.task:
                return
            self.started = True
        elif not self.started or etype not in _TRANSLATED:
            return
        self.pending.append(event)
        if on_loop:
            self.wake.set()
        else:
            # RuntimeError: the loop is closed, so nobody reads any more.
            with contextlib.suppress(RuntimeError):
                self.loop.call_soon_threadsafe(self.wake.set)


class _Translator:
    """Log events of one turn -> stream events (``None``: nothing to show)."""

    def __init__(self) -> None:
        self.turn: int | None = None
        self.turn_end: Event | None = None

    def __call__(self, event: Event) -> StreamEvent | None:
        data = event.data  # a packed event decodes on each access: once here
        if event.type == "turn/start":
            self.turn = data["turn"]
            return None
        if data.get("turn") != self.turn or self.turn_end is not None:
            return None
        seq, turn, etype = event.seq, data["turn"], event.type
        if etype == "assistant/chunk":
            return _chunk_event(seq, turn, data["step"], data["chunk"])
        if etype == "assistant/message":
            return MessageEvent(
                seq=seq,
                turn=turn,
                step=data["step"],
                content=data["content"],
                usage=data.get("usage"),
                interrupted=bool(data.get("interrupted", False)),
            )
        if etype == "tool/call":
            return ToolCallEvent(
                seq=seq,
                turn=turn,
                step=data["step"],
                call_id=data["call_id"],
                name=data["name"],
                arguments=data["arguments"],
            )
        if etype == "tool/result":
            return ToolResultEvent(
                seq=seq,
                turn=turn,
                step=data["step"],
                call_id=data["call_id"],
                content=data["content"],
                is_error=data["is_error"],
                error=data.get("error"),
            )
        if etype == "step/end":
            return StepEnd(
                seq=seq,
                turn=turn,
                step=data["step"],
                sent=bool(data.get("sent", True)),
                error=data.get("error"),
            )
        if etype == "turn/end":
            self.turn_end = event  # yielded last, with the turn's result
        return None


def _chunk_event(seq: int, turn: int, step: int, chunk: Mapping[str, Any]) -> StreamEvent | None:
    kind = chunk.get("kind")
    if kind == "text":
        return TextDelta(seq=seq, turn=turn, step=step, text=chunk["text"])
    if kind == "reasoning":
        return ReasoningDelta(seq=seq, turn=turn, step=step, text=chunk["text"])
    if kind == "error":
        return AttemptFailed(
            seq=seq,
            turn=turn,
            step=step,
            attempt=chunk["attempt"],
            status=chunk.get("status"),
            message=chunk["message"],
            retry_in_ms=chunk.get("retry_in_ms"),
            overflow=bool(chunk.get("overflow", False)),
        )
    return None


async def stream_turn(
    agent: Agent, run: Callable[[], Coroutine[Any, Any, TurnResult]]
) -> AsyncGenerator[StreamEvent, None]:
    """Run the turn ``run()`` starts on ``agent`` and yield its events (see the
    module docstring). Nothing starts until the first event is asked for."""
    loop = asyncio.get_running_loop()
    feed = _Feed(loop)
    translate = _Translator()
    unsubscribe = agent.session.subscribe(feed.listen)
    task = feed.task = loop.create_task(run())
    task.add_done_callback(lambda _: feed.wake.set())
    try:
        while True:
            feed.wake.clear()
            while feed.pending:
                out = translate(feed.pending.popleft())
                if out is not None:
                    yield out
            if task.done():
                break
            await feed.wake.wait()
        cancelled = task.cancelled()
        error = None if cancelled else task.exception()
        end = translate.turn_end
        if end is not None:
            # A turn that raised still logged its end, and built its result first.
            result = agent._last_result if cancelled or error is not None else task.result()
            if result is not None:
                yield TurnEnd(
                    seq=end.seq, turn=result.turn, reason=end.data["reason"], result=result
                )
        if error is not None:
            raise error
        if cancelled:
            raise asyncio.CancelledError()
    finally:
        await _stop(agent, task, started=feed.started)
        unsubscribe()


async def _stop(agent: Agent, task: asyncio.Task[TurnResult], *, started: bool) -> None:
    """Make the turn end (if the consumer stopped early) and collect its outcome."""
    if not task.done():
        if started:
            # Between turn/start and the turn's end an abort handle is always
            # live (run() creates it in the same frame), so this is not lost.
            agent.abort(STREAM_CLOSED)
        else:
            task.cancel()  # not started: nothing was logged, nothing will be
        # asyncio.wait, unlike awaiting the task, never cancels it when this
        # (the consumer's) task is cancelled: the turn still closes its log.
        await asyncio.wait({task})
    if not task.cancelled():
        task.exception()  # retrieved: the log holds the outcome of an unread turn
