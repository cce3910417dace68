"""Server-Sent Events from bytes as they arrive: one decoder for every reader.

The loop's clients (``_http.stream_sse``) and the proxy's relay both read an
upstream's event stream through :class:`SseDecoder`. It is fed the body's
bytes in whatever pieces the network gives (a CRLF or a multi-byte character
cut in two included), so the reader keeps the one iterator over the body and
can read it to the end of its HTTP message after the last event it needs:
that is what hands a kept-alive connection back to its pool.
"""

from __future__ import annotations

import codecs
import re
from typing import Final

from httpx_sse import ServerSentEvent

__all__ = ["SseDecoder"]

_LINE_END: Final = re.compile(r"\r\n|\r|\n")


class SseDecoder:
    """Server-Sent Events from bytes as they arrive (the event stream format:
    lines ending in CR, LF or CRLF; ``data`` lines joined by newlines; a blank
    line dispatches; comments and unknown fields are ignored)."""

    def __init__(self) -> None:
        self._text = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buffer = ""
        self._event = ""
        self._data: list[str] = []
        self._id = ""

    def feed(self, data: bytes) -> list[ServerSentEvent]:
        """The events completed by ``data``."""
        self._buffer += self._text.decode(data)
        return self._lines(final=False)

    def end(self) -> list[ServerSentEvent]:
        """The last event, if the stream ended without its blank line."""
        self._buffer += self._text.decode(b"", final=True)
        events = self._lines(final=True)
        if self._buffer:
            events.extend(self._line(self._buffer))
            self._buffer = ""
        events.extend(self._line(""))
        return events

    def _lines(self, *, final: bool) -> list[ServerSentEvent]:
        events: list[ServerSentEvent] = []
        buffer = self._buffer
        start = 0
        for found in _LINE_END.finditer(buffer):
            # A CR at the very end may be the first half of a CRLF.
            if not final and found.group() == "\r" and found.end() == len(buffer):
                break
            events.extend(self._line(buffer[start : found.start()]))
            start = found.end()
        self._buffer = buffer[start:]
        return events

    def _line(self, line: str) -> list[ServerSentEvent]:
        if not line:
            if not self._data and not self._event:
                return []
            event = ServerSentEvent(
                event=self._event or "message", data="\n".join(self._data), id=self._id
            )
            self._event, self._data = "", []
            return [event]
        if line.startswith(":"):
            return []
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            self._id = value
        return []
