"""Server-Sent Events framing and the deterministic split of text into pieces.

Both wire modules stream through these helpers so frame bytes have one shape:
OpenAI-style unnamed ``data:`` frames, Anthropic-style named ``event:`` frames,
and SSE comments (DeepSeek's ``: keep-alive``), each ending in a blank line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tapelog.log import encode

__all__ = [
    "Stream",
    "comment_frame",
    "data_frame",
    "event_frame",
    "split_even",
    "split_every",
]


def data_frame(payload: Any) -> bytes:
    """``data: {json}`` + blank line (``payload`` may also be the raw text ``[DONE]``)."""
    body = payload.encode("utf-8") if isinstance(payload, str) else encode(payload)
    return b"data: " + body + b"\n\n"


def event_frame(name: str, payload: Any) -> bytes:
    return b"event: " + name.encode("ascii") + b"\ndata: " + encode(payload) + b"\n\n"


def comment_frame(text: str) -> bytes:
    return b": " + text.encode("utf-8") + b"\n\n"


def split_every(text: str, size: int = 24) -> list[str]:
    """Pieces of at most ``size`` characters (none for an empty text)."""
    return [text[i : i + size] for i in range(0, len(text), size)]


def split_even(text: str, count: int = 3) -> list[str]:
    """At most ``count`` non-empty pieces of near-equal length, joined back to ``text``."""
    if not text:
        return []
    count = max(1, min(count, len(text)))
    step, extra = divmod(len(text), count)
    out: list[str] = []
    start = 0
    for i in range(count):
        end = start + step + (1 if i < extra else 0)
        out.append(text[start:end])
        start = end
    return out


@dataclass(frozen=True, slots=True)
class Stream:
    """A response stream cut into the parts a fault can stop between.

    ``lead`` are comments (not counted as frames); ``frames`` run from the first
    event through the finish, of which the first ``opening`` open the message;
    ``closing`` carries what only a complete stream has (usage, ``[DONE]``,
    ``message_delta`` / ``message_stop``).
    """

    lead: list[bytes]
    frames: list[bytes]
    closing: list[bytes]
    opening: int

    def cut(self, count: int) -> list[bytes]:
        """The stream closed after ``count`` frames: no usage, no end marker."""
        return [*self.lead, *self.frames[:count]]

    def failing(self, error_frame: bytes) -> list[bytes]:
        """The message opens, then the error arrives and the stream ends."""
        return [*self.lead, *self.frames[: self.opening], error_frame]

    def complete(self) -> list[bytes]:
        return [*self.lead, *self.frames, *self.closing]
