"""The per-node projection from surface events to neutral messages.

``derive_event_message`` is the only function that turns a logged event into a
model-visible message. The live session cache, the invariant checker and every
external rebuilder fold this same function, so two paths can never disagree.

Neutral messages are frozen JSON objects ``{"role": ..., "content": [blocks]}``
with role ``user``, ``assistant`` or ``tool`` (or, from a ``user/message``
that names it, ``developer`` / ``system``), plus ``fields`` when the event
carries a client message's other wire members (see docs/format.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tapelog.log._events import UNPROJECTED, Event
from tapelog.log._freeze import FrozenDict, freeze_trusted

__all__ = ["derive_event_message", "fold_messages"]


def derive_event_message(event: Event) -> FrozenDict | None:
    """Project one surface event to its message, or ``None`` if it shows nothing.

    Pure: the result depends on the event alone. Non-surface events and
    assistant messages with empty content (and no ``fields``) give ``None``.
    The message is made once per event and kept on it (it is frozen), so the
    session's fold and the checker's shadow hold one message per node, not two.
    """
    message = event._message
    if message is UNPROJECTED:
        message = _derive(event)
        object.__setattr__(event, "_message", message)
    projected: FrozenDict | None = message
    return projected


def _derive(event: Event) -> FrozenDict | None:
    data = event.data
    etype = event.type
    if etype == "user/message" or etype == "context/message":
        return _message(data.get("role", "user"), data["content"], data)
    if etype == "assistant/message":
        if not data["content"] and not data.get("fields"):
            return None
        return _message("assistant", data["content"], data)
    if etype == "tool/result":
        block = {
            "type": "tool_result",
            "tool_call_id": data["call_id"],
            "content": data["content"],
            "is_error": data["is_error"],
        }
        for key in ("extra", "omit"):  # the wire's result block: the client's other fields
            if key in data:
                block[key] = data[key]
        return _message("tool", [block], data)
    return None


def _message(role: str, content: Any, data: Any) -> FrozenDict:
    # Built from an event's frozen data only: no second validating walk, and
    # no redaction (a message is derived from the log, so it must be exactly
    # what the log says whatever secrets this process has registered).
    shaped = {"role": role, "content": content}
    fields = data.get("fields")
    if fields is not None:  # even empty: a client message of its own (the Anthropic wire)
        shaped["fields"] = fields
    if data.get("content_string"):
        shaped["content_string"] = True
    message: FrozenDict = freeze_trusted(shaped)
    return message


def fold_messages(surface_events: Iterable[Event]) -> list[FrozenDict]:
    """Fold :func:`derive_event_message` over surface events in surface order."""
    out: list[FrozenDict] = []
    for event in surface_events:
        message = derive_event_message(event)
        if message is not None:
            out.append(message)
    return out
