"""Ending a step so the log stays well formed, whatever stopped it.

A step ends with ``step/end`` in every case. Before it, in this order: an
``assistant/message`` if the step has none yet (every step logs exactly one:
an empty, interrupted one when no answer came), an error ``tool/result`` for
each tool call the step logged, or its answer asked for, without a result
(``tapelog.log.answer_open_calls``, which logs the ``tool/call`` first when
only the answer names it: a history with an unanswered call is refused by
every provider), and the context injected while the step
was in flight (:meth:`Agent.inject` waits for the step's results, so it never
lands between a tool call and its result). A step whose request never left
(a hook, listener, flush or the checker failed, or an abort came first) says
so: ``step/end {"sent": false, "error": ...}``, so the rebuild skips it.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from tapelog.log._api import (
    Event,
    FrozenList,
    LlmCallConfig,
    OpenCall,
    Session,
    ToolLedger,
    answer_open_calls,
)

__all__ = ["UNANSWERED_TOOL_RESULT", "StepInFlight", "close_step", "error_of", "open_step_events"]

UNANSWERED_TOOL_RESULT = (
    "error: the step ended before this tool call got a result (the tool may or may not have run)"
)


def _unanswered(call: OpenCall) -> str:
    return UNANSWERED_TOOL_RESULT


def error_of(exc: BaseException | str) -> dict[str, str]:
    """A logged error object: the exception's type and message."""
    if isinstance(exc, str):
        return {"type": "Aborted", "message": exc}
    return {"type": type(exc).__name__, "message": str(exc)}


def open_step_events(session: Session) -> tuple[Event | None, list[Event]]:
    """The open step's ``step/start`` (``None`` if no step is open) and its events
    after it but its streamed chunks (what closing a step reads: its answer, tool
    calls and results; the chunks, most of a step, are not made into events)."""
    events = session.events
    for seq in range(len(events) - 1, -1, -1):
        etype = events.type_at(seq)  # by type: no event made on the way
        if etype in ("step/end", "turn/start", "turn/end"):
            return None, []
        if etype == "step/start":
            kept = enumerate(events.types(seq + 1), seq + 1)
            return events[seq], [events[s] for s, t in kept if t != "assistant/chunk"]
    return None, []


def close_step(
    session: Session,
    *,
    source: Mapping[str, Any] | None,
    context: list[tuple[FrozenList, str]],
    sent: bool = True,
    error: BaseException | str | None = None,
) -> Event | None:
    """End the open step (see the module docstring); ``None`` if none is open.

    ``source`` is the provider and model for a missing ``assistant/message``;
    ``context`` the injections waiting for the step to end (logged and cleared).
    """
    start, after = open_step_events(session)
    if start is None:
        return None
    turn, step = start.data["turn"], start.data["step"]
    if source is not None and not any(e.type == "assistant/message" for e in after):
        session.append(
            "assistant/message",
            {"turn": turn, "step": step, "content": [], "source": source, "interrupted": True},
            surface_op="append",
        )
    # the calls the step logged, and those only its answer names (a listener
    # raised before their tool/call events were logged)
    calls = ToolLedger().observe_all(after).open_calls()
    answer_open_calls(session, start, calls, kind="unanswered", content=_unanswered)
    while context:
        content, kind = context.pop(0)
        session.append(
            "context/message", {"content": content, "source": {"kind": kind}}, surface_op="append"
        )
    if sent and error is None:
        # The same payload as step/start: log the same frozen object (one per step).
        return session.append("step/end", start.data)
    data: dict[str, Any] = {"turn": turn, "step": step}
    if not sent:
        data["sent"] = False
    if error is not None:
        data["error"] = error_of(error)
    return session.append("step/end", data)


class StepInFlight:
    """Whether one agent's step is in flight, and the context waiting for its end.

    ``Agent.inject`` may be called from any thread (a tool running on a worker
    thread). While a step is in flight its message is queued, and logged when
    the step ends, after the step's tool results (see :func:`close_step`). The
    step counts as in flight until its closing events are logged, and deciding
    to queue or to log takes the same lock as closing: an inject can never land
    between a call and the synthetic result that closes it.
    """

    __slots__ = ("_lock", "_session", "_waiting", "active", "config")

    def __init__(self, session: Session) -> None:
        self._session = session
        self._lock = threading.RLock()
        self._waiting: list[tuple[FrozenList, str]] = []
        self.active = False
        self.config: LlmCallConfig | None = None
        """The config of the step in flight, once its ``request`` hook has run."""

    def begin(self, config: LlmCallConfig) -> None:
        with self._lock:
            self.active, self.config = True, config

    def offer(self, content: FrozenList, kind: str) -> Event | None:
        """Log a ``context/message`` now, or queue it for the step's end (``None``)."""
        with self._lock:
            if self.active:
                self._waiting.append((content, kind))
                return None
            return self._session.append(
                "context/message",
                {"content": content, "source": {"kind": kind}},
                surface_op="append",
            )

    def close(
        self,
        fallback: LlmCallConfig,
        *,
        sent: bool = True,
        error: BaseException | str | None = None,
    ) -> None:
        """End the open step, if any (:func:`close_step`); ``fallback`` names the
        provider and model when the step's own config is not known yet."""
        with self._lock:
            config = self.config or fallback
            try:
                close_step(
                    self._session,
                    source={"provider": config.provider, "model": config.model},
                    context=self._waiting,
                    sent=sent,
                    error=error,
                )
            finally:
                self.active, self.config = False, None
