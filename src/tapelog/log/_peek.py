"""A field or two of an event's payload, without freezing it.

``Event.data`` of a packed event (``PackedEvent``) decodes its payload bytes
and freezes the result, every time it is read: right for a reader that keeps
or hands out the data. A reader that only looks at one field of many events
(the request walk reads ``turn`` and ``step`` of every ``step/start`` and
``sent`` of every ``step/end``) pays for the freeze and drops it. :func:`peek_data`
gives the payload as plain decoded JSON: the same values, nothing frozen, not to
be kept or changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tapelog.log._canonical import decode_raw
from tapelog.log._events import Event, PackedEvent

__all__ = ["peek_data"]


def peek_data(event: Event) -> Mapping[str, Any]:
    """``event.data``, read for a look: a packed event's payload bytes decoded
    (never frozen: do not keep or change it), any other event's own data."""
    if type(event) is PackedEvent:
        data: Mapping[str, Any] = decode_raw(event._payload())
        return data
    return event.data
