"""The log's structural rules, kept event by event: what a loop could have written.

A session's events must nest the way the loop writes them, or some request the
log says was sent cannot be rebuilt or would be refused by every provider.
:class:`LogRules` is the one place these rules live; ``Session.append``,
``Session.from_events`` (so every store load) and ``tapelog verify`` all run
it, so "a log that loads is a log the loop could have written" holds:

* turns do not overlap: a ``turn/start`` needs every turn closed, a
  ``turn/end`` ends the open turn (by its number) and no step of it is open;
* steps lie inside their turn and do not overlap: a ``step/start`` names the
  open turn and needs no open step, a ``step/end`` ends the open step;
* an event of a step (``assistant/chunk``, ``assistant/message``,
  ``tool/call``, an appended ``tool/result``) logged while a step is open
  carries that step's turn and step (one logged while no step is open is left
  alone: hand-written logs and a proxy's client results do that, and no
  request depends on it);
* an appended ``tool/result`` answers a tool call logged before it (asked by
  an ``assistant/message`` or logged as a ``tool/call``); it may answer one
  again, since a client that rewrites its history re-sends results after a
  ``replace`` shadowed the first ones;
* a step ends with every ``tool/call`` it logged answered, unless its turn
  ends right after it by handing the calls on: ``turn/end`` ``tool_calls``
  (``tapelog proxy``: the client runs them and sends their results with its
  next request) or ``interrupted`` (repair after a crash). ``log/digest``
  events may come between;
* the step boundary: every tool call an ``assistant/message`` asked for is
  answered before the next request is made (``step/start``, or a
  ``compact/start`` that names a region to summarise): a request holding a
  call without its result is refused by every provider, on every later request;
* a ``tool/approval`` (the agent's approver deciding on a call) lies in the
  open step and names one of its ``tool/call`` events that has no result yet;
* a fork's seed is followed by its ``session/end-seed``.

``log/digest``, ``context/message``, ``compact/*`` and ``session/*`` events are
free to come anywhere else. Each event costs O(1) (the pairing step is O(open
calls), which the loop keeps small). The rules never look ahead: a step that
ends with calls open is judged by the event after it.

:meth:`LogRules.check` only reads, :meth:`LogRules.apply` only moves the
state: a session checks an event, then commits it, so an event that breaks a
rule leaves nothing behind.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from tapelog._errors import EventError
from tapelog.log._events import Event
from tapelog.log._pairing import OpenCall, ToolLedger

__all__ = ["HANDED_OVER", "LogRules"]

HANDED_OVER: Final = frozenset({"tool_calls", "interrupted"})
"""``turn/end`` reasons after which a step's tool calls may still wait for their results."""

_IN_STEP: Final = frozenset({"assistant/chunk", "assistant/message", "tool/call"})
_FREE: Final = frozenset({"log/digest"})
"""Events that may sit between a handing-over step's ``step/end`` and its ``turn/end``."""


def _listed(calls: Mapping[str, int]) -> str:
    return ", ".join(f"{cid} (seq {seq})" for cid, seq in calls.items())


def _asked(asked: list[OpenCall]) -> str:
    return ", ".join(f"{call.call_id} (seq {call.asked_at})" for call in asked)


class LogRules:
    """The turn/step/tool-call state of a log, fed one event at a time (module docstring)."""

    __slots__ = ("_calls", "_handed", "_handing", "_known", "_seed", "_step", "_turn", "ledger")

    def __init__(self, *, seed_length: int | None = None) -> None:
        self._seed = seed_length
        self._turn: tuple[int, int] | None = None  # (turn number, seq of its turn/start)
        self._step: tuple[int, int, int] | None = None  # (turn, step, seq of its step/start)
        self._calls: dict[str, int] = {}  # tool/call ids of the open step without a result
        self._handing: tuple[int, int, int, dict[str, int]] | None = None
        """A step that ended with open calls: (turn, step, seq of its step/end, calls);
        the next event but digests must be the turn/end that hands them on."""
        self._handed: set[str] = set()
        self._known: set[str] = set()  # every call id asked for or logged so far
        self.ledger = ToolLedger()
        """Tool calls still waiting for their result (read it, never feed it)."""

    @property
    def open_turn(self) -> int | None:
        """The number of the turn open now (``None``: every turn is closed)."""
        return None if self._turn is None else self._turn[0]

    def handed_over(self) -> set[str]:
        """Ids of logged tool calls a step handed on (to a client, or to repair)
        with a ``turn/end``, or is handing on (the log ends after its step)."""
        if self._handing is None:
            return set(self._handed)
        return self._handed | set(self._handing[3])

    # --- the rules ------------------------------------------------------------

    def check(self, event: Event, data: Mapping[str, Any]) -> None:
        """Raise :class:`EventError` if ``event`` (with payload ``data``, already
        valid) may not come next; changes nothing."""
        self.check_at(event.type, event.seq, event.surface_op, data)

    def check_at(self, etype: str, seq: int, surface_op: Any, data: Mapping[str, Any]) -> None:
        """:meth:`check` of the event of type ``etype`` at ``seq`` with that
        surface op and payload, for a caller that holds no event object (a load
        judging a batch of lines)."""
        if self._seed is not None and seq == self._seed and etype != "session/end-seed":
            raise EventError(
                f"the session is a fork whose first {self._seed} events are its seed, but "
                f"this {etype} is not the session/end-seed a fork logs after its seed"
            )
        if self._handing is not None and etype not in _FREE:
            self._check_handing(etype, data)
        if etype == "assistant/chunk":  # most events: the one rule that binds them, inline
            step = self._step
            if step is not None and (data["turn"] != step[0] or data["step"] != step[1]):
                self._check_in_step(etype, data)
            return
        if etype == "turn/start":
            if self._turn is not None:
                raise EventError(
                    f"turn {data['turn']} starts while turn {self._turn[0]} (seq "
                    f"{self._turn[1]}) is still open: two turns ran at once on the session, "
                    "or a turn/end is missing"
                )
        elif etype == "turn/end":
            self._check_turn_end(data)
        elif etype == "step/start":
            self._check_step_start(data)
        elif etype == "step/end":
            self._check_step_end(data)
        elif etype == "tool/approval":
            self._check_approval(data)
        elif etype == "compact/start" and data.get("region") and (asked := self.ledger.asked()):
            raise EventError(
                f"this compaction's summary request would hold tool calls without "
                f"their results ({_asked(asked)}): a provider refuses such a request; "
                "answer them with tool/result events first"
            )
        if etype in _IN_STEP or (etype == "tool/result" and surface_op == "append"):
            self._check_in_step(etype, data)

    def passes_chunk(self, seq: int, data: Mapping[str, Any]) -> bool:
        """Whether an ``assistant/chunk`` at ``seq`` (with payload ``data``, already
        valid) passes :meth:`check` and leaves :meth:`apply` nothing to do: no
        step is handing calls on, it is not where a fork's seed ends, and it is
        in the open step (if any). ``False`` says nothing: :meth:`check` decides.
        The replay of a load asks this of half its events."""
        step = self._step
        return (
            self._handing is None
            and seq != self._seed
            and (step is None or (data["turn"] == step[0] and data["step"] == step[1]))
        )

    def chunk_gate(self) -> tuple[int, int] | bool:
        """What an ``assistant/chunk`` must carry to pass :meth:`check` with
        :meth:`apply` left nothing to do, for a run of chunks judged in bulk
        (:meth:`passes_chunk` asked once for the run): the open step's ``(turn,
        step)``; ``True`` when no step is open (any chunk passes); ``False``
        when a step is handing calls on (:meth:`check` decides each). Where a
        fork's seed ends is the caller's to check, as in :meth:`passes_chunk`.
        Valid until the next event other than a chunk is applied."""
        if self._handing is not None:
            return False
        step = self._step
        return True if step is None else (step[0], step[1])

    def _check_handing(self, etype: str, data: Mapping[str, Any]) -> None:
        assert self._handing is not None
        t, k, seq, calls = self._handing
        if etype == "turn/end" and data["reason"]["kind"] in HANDED_OVER:
            return
        raise EventError(
            f"step {k} of turn {t} ended (seq {seq}) with tool calls that have no result: "
            f"{_listed(calls)}; only a turn/end that hands them on (reason tool_calls, or "
            f"interrupted) may follow such a step, not this {etype}"
        )

    def _check_turn_end(self, data: Mapping[str, Any]) -> None:
        number = data["turn"]
        if self._turn is None:
            raise EventError(f"turn {number} ends, but no turn is open")
        if number != self._turn[0]:
            raise EventError(
                f"turn {number} ends, but the open turn is turn {self._turn[0]} "
                f"(seq {self._turn[1]})"
            )
        if self._step is not None:
            raise EventError(
                f"turn {number} ends while its step {self._step[1]} (seq {self._step[2]}) "
                "is still open (no step/end)"
            )

    def _check_step_start(self, data: Mapping[str, Any]) -> None:
        t, k = data["turn"], data["step"]
        if self._turn is None:
            raise EventError(f"step {k} of turn {t} starts outside any turn (no turn/start)")
        if t != self._turn[0]:
            raise EventError(
                f"step {k} of turn {t} starts inside turn {self._turn[0]} (seq {self._turn[1]})"
            )
        if self._step is not None:
            raise EventError(
                f"step {k} of turn {t} starts while step {self._step[1]} of turn "
                f"{self._step[0]} (seq {self._step[2]}) is still open: two turns ran at once "
                "on the session, or a step/end is missing"
            )
        if asked := self.ledger.asked():
            raise EventError(
                f"this step's request would hold tool calls without their results "
                f"({_asked(asked)}): a provider refuses such a request; two turns ran at "
                "once on the session, or results are missing"
            )

    def _check_step_end(self, data: Mapping[str, Any]) -> None:
        t, k = data["turn"], data["step"]
        step = self._step
        if step is None:
            raise EventError(f"step {k} of turn {t} ends, but no step is open")
        if (t, k) != step[:2]:
            raise EventError(
                f"step {k} of turn {t} ends, but the open step is step {step[1]} of turn "
                f"{step[0]} (seq {step[2]})"
            )

    def _check_approval(self, data: Mapping[str, Any]) -> None:
        """A decision on a call of the open step that has no result yet."""
        if self._step is None:
            raise EventError("this tool/approval is logged outside any step (no open step/start)")
        self._check_in_step("tool/approval", data)
        if data["call_id"] not in self._calls:
            raise EventError(
                f"this tool/approval decides on call {data['call_id']!r}, but the open step "
                "has no tool call with that id waiting for its result"
            )

    def _check_in_step(self, etype: str, data: Mapping[str, Any]) -> None:
        step = self._step
        if step is not None and (data["turn"] != step[0] or data["step"] != step[1]):
            raise EventError(
                f"this {etype} of step {data['step']} of turn {data['turn']} is logged inside "
                f"step {step[1]} of turn {step[0]} (seq {step[2]}): two turns ran at once on "
                "the session"
            )
        if etype == "tool/result" and data["call_id"] not in self._known:
            raise EventError(
                f"this tool/result answers call {data['call_id']!r}, but no tool call with "
                "that id is logged before it (no assistant/message asked for it and no "
                "tool/call names it)"
            )

    # --- the state ------------------------------------------------------------

    def apply(self, event: Event, data: Mapping[str, Any]) -> None:
        """Move past ``event`` (checked, or reported by ``verify``: then the state
        is set as the event says, so later events are judged sensibly)."""
        etype = event.type
        if etype == "assistant/chunk" and self._handing is None:
            return  # a chunk moves nothing
        self.apply_marker(etype, event.seq, data)
        if etype in _IN_STEP or (etype == "tool/result" and event.surface_op == "append"):
            if etype == "tool/call":
                self._calls[data["call_id"]] = event.seq
                self._known.add(data["call_id"])
            elif etype == "assistant/message":
                for block in data["content"]:
                    if block["type"] == "tool_call":
                        self._known.add(block["id"])
            elif etype == "tool/result":
                self._calls.pop(data["call_id"], None)
            self.ledger.observe(event, data)

    def apply_marker(self, etype: str, seq: int, data: Mapping[str, Any]) -> None:
        """:meth:`apply` for an event that is not of a step's content (a
        ``turn/*`` or ``step/*`` marker, or any but a chunk, a tool call, an
        assistant message or an appended tool result, for which :meth:`apply`
        goes on): what it needs no event object for."""
        if self._handing is not None and etype not in _FREE:
            if etype == "turn/end" and data["reason"]["kind"] in HANDED_OVER:
                self._handed.update(self._handing[3])
            self._handing = None
        if etype == "turn/start":
            self._turn, self._step, self._calls = (data["turn"], seq), None, {}
        elif etype == "turn/end":
            self._turn, self._step, self._calls = None, None, {}
        elif etype == "step/start":
            if self.ledger.asked():
                self.ledger.clear()  # reported; judge the next request afresh
            self._step, self._calls = (data["turn"], data["step"], seq), {}
        elif etype == "step/end":
            if self._calls:
                self._handing = (data["turn"], data["step"], seq, self._calls)
            self._step, self._calls = None, {}
        elif etype == "compact/start" and data.get("region") and self.ledger.asked():
            self.ledger.clear()
