"""Tool calls and their results: the pairing rule every request must keep.

Every provider refuses a request whose assistant message asks for tool calls
that are not all answered by tool results before the next other message (or
the end of the request): an HTTP 400, on every later request of the session.
The rule is checked in two places, and both take it from here:

* on the log, event by event (:class:`ToolLedger`): which tool calls the
  ``assistant/message`` events asked for (and which ``tool/call`` events were
  logged) still wait for a ``tool/result``. Repair closes them, ``verify``
  reports them.
* on a request's messages (:func:`unanswered_tool_calls`): the pre-send checker
  refuses a request that breaks it before it leaves, rather than the provider.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tapelog.log._events import Event

__all__ = ["OpenCall", "ToolLedger", "unanswered_tool_calls"]


@dataclass(frozen=True, slots=True)
class OpenCall:
    """A tool call that has no ``tool/result`` yet."""

    call_id: str
    name: str
    arguments: str
    asked_at: int | None
    """The seq of the ``assistant/message`` that asked for it (``None``: only a
    ``tool/call`` names it, as in hand-written logs)."""
    call: Event | None
    """Its ``tool/call`` event, once logged."""


class ToolLedger:
    """The tool calls of a log that still wait for their result, fed one event at a time.

    An ``assistant/message`` opens one call per ``tool_call`` block, a
    ``tool/call`` attaches its event to the call (or opens one no message
    asked for), a ``tool/result`` appended to the surface closes it (a
    replacing one trims a result that is already there).
    """

    __slots__ = ("_open",)

    def __init__(self) -> None:
        self._open: dict[str, OpenCall] = {}

    def observe(self, event: Event, data: Mapping[str, Any] | None = None) -> None:
        """Fold one event into the ledger; ``data`` is its payload when the caller
        holds it already (a packed event decodes its payload on each access)."""
        etype = event.type
        if etype == "assistant/message":
            for block in (event.data if data is None else data)["content"]:
                if block["type"] == "tool_call":
                    self._open[block["id"]] = OpenCall(
                        block["id"], block["name"], block["arguments"], event.seq, None
                    )
        elif etype == "tool/call":
            data = event.data if data is None else data
            asked = self._open.get(data["call_id"])
            self._open[data["call_id"]] = OpenCall(
                data["call_id"],
                data["name"],
                data["arguments"],
                asked.asked_at if asked is not None else None,
                event,
            )
        elif etype == "tool/result" and event.surface_op == "append":
            self._open.pop((event.data if data is None else data)["call_id"], None)

    def observe_all(self, events: Iterable[Event]) -> ToolLedger:
        for event in events:
            self.observe(event)
        return self

    def open_calls(self) -> list[OpenCall]:
        """Every call without a result, in the order first asked or logged."""
        return list(self._open.values())

    def asked(self) -> list[OpenCall]:
        """The open calls an ``assistant/message`` asked for: the ones a request
        would hold without their results."""
        return [call for call in self._open.values() if call.asked_at is not None]

    def clear(self) -> None:
        self._open.clear()


def _blocks(message: Mapping[str, Any]) -> Sequence[Mapping[str, Any]]:
    content = message.get("content")
    return content if isinstance(content, Sequence) and not isinstance(content, str) else ()


def unanswered_tool_calls(messages: Iterable[Mapping[str, Any]]) -> list[str]:
    """The ids of the first assistant message's tool calls that are not all
    answered before the next message that answers none (or the end); ``[]``
    when every call is answered.

    ``messages`` are neutral messages (docs/format.md): a message answers the
    calls its ``tool_result`` blocks name (role ``tool``, as the log projects
    results, or ``user``, as some clients send them).
    """
    pending: list[str] = []
    for message in messages:
        blocks = _blocks(message)
        answers = [b.get("tool_call_id") for b in blocks if b.get("type") == "tool_result"]
        if answers and message.get("role") != "assistant":
            pending = [call for call in pending if call not in answers]
            continue
        if pending:
            return pending
        if message.get("role") == "assistant":
            pending = [str(b.get("id")) for b in blocks if b.get("type") == "tool_call"]
    return pending
