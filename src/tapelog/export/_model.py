"""The spans of a session as plain data, and the ids that make re-exports repeatable.

:func:`tapelog.export.otel_spans` maps a log to these records without touching
OpenTelemetry; ``_otlp`` hands them to the official SDK and exporter. Keeping
the mapping free of the SDK lets it be read, tested and documented on its own
(docs/otel.md), and keeps ``import tapelog`` free of the optional extra.

Ids are derived, not random (docs/otel.md, "Ids"): the trace id is the first
16 bytes of ``SHA-256("tapelog-otel-trace\\0" + session id)``, a span id the
first 8 bytes of ``SHA-256("tapelog-otel-span\\0" + session id + "\\0" +
key)``, the key being ``session`` for the root span and the decimal seq of
the event that opens the span otherwise (``turn/start``, ``step/start``,
``tool/call``, ``compact/start``). Exporting the same session twice gives the
same ids; a fork's root span links to its parent session's root span by
computing the parent's ids the same way.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

__all__ = ["AttributeValue", "OtelSpan", "OtelTrace", "SpanEvent", "span_id", "trace_id"]

AttributeValue = str | bool | int | float | tuple[str, ...] | tuple[int, ...]
"""What OpenTelemetry accepts as an attribute value (the kinds used here)."""


def _digest(*parts: str) -> bytes:
    return hashlib.sha256("\0".join(parts).encode("utf-8")).digest()


def trace_id(session_id: str) -> int:
    """The 128-bit trace id of a session's export (never 0, the invalid id)."""
    return int.from_bytes(_digest("tapelog-otel-trace", session_id)[:16], "big") or 1


def span_id(session_id: str, key: str | int) -> int:
    """The 64-bit id of a span: ``key`` is ``"session"`` or the opening event's seq."""
    return int.from_bytes(_digest("tapelog-otel-span", session_id, str(key))[:8], "big") or 1


@dataclass(frozen=True, slots=True, kw_only=True)
class SpanEvent:
    """A timestamped note on a span (a failed attempt before a retry)."""

    name: str
    time_ns: int
    attributes: Mapping[str, AttributeValue]


@dataclass(frozen=True, slots=True, kw_only=True)
class OtelSpan:
    """One span, with everything the exporter sends."""

    name: str
    kind: Literal["internal", "client"]
    trace_id: int
    span_id: int
    parent_id: int | None
    """``None`` for the session's root span."""
    start_ns: int
    end_ns: int
    attributes: Mapping[str, AttributeValue]
    events: tuple[SpanEvent, ...] = ()
    error: str | None = None
    """Status ``ERROR`` with this description; ``None`` leaves the status unset."""
    links: tuple[tuple[int, int], ...] = ()
    """``(trace id, span id)`` of related spans: a fork's parent session root."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OtelTrace:
    """A session's spans: its root first, then in the order they closed in the log."""

    session_id: str
    trace_id: int
    spans: tuple[OtelSpan, ...]
    turns: int
    model_calls: int
    tool_calls: int

    @property
    def trace_id_hex(self) -> str:
        """The trace id as tracing tools print it (32 lowercase hex digits)."""
        return f"{self.trace_id:032x}"
