"""What a Responses API client gets from the proxy besides the relayed stream.

A non-streaming client (``"stream": false`` or none) gets the ``response``
object of the stream's last event (``response.completed`` or
``response.incomplete``): the provider's whole response, as its non-streamed
answer is shaped, taken as it came rather than rebuilt. A stream that breaks
is ended for a streaming client with an ``error`` event, on which the SDKs
raise.
"""

from __future__ import annotations

from typing import Any, Final

from httpx_sse import ServerSentEvent

from tapelog._errors import JsonValueError
from tapelog.log import decode
from tapelog.log._api import encode_trusted

__all__ = ["ResponsesAnswer", "responses_error_event"]

_FINAL: Final = frozenset({"response.completed", "response.incomplete"})


class ResponsesAnswer:
    """The ``response`` object of the stream's final event."""

    def __init__(self) -> None:
        self._response: Any = None

    def feed(self, event: ServerSentEvent) -> None:
        if event.event not in _FINAL:
            return
        try:
            frame = decode(event.data)
        except JsonValueError:
            return
        if isinstance(frame, dict) and isinstance(frame.get("response"), dict):
            self._response = frame["response"]

    def body(self) -> bytes:
        return encode_trusted(self._response if self._response is not None else {})


def responses_error_event(message: str) -> bytes:
    """The ``error`` event that ends a broken Responses stream for the client."""
    payload = {
        "type": "error",
        "code": "tapelog_proxy",
        "message": message,
        "param": None,
        "sequence_number": 0,
    }
    return b"event: error\ndata: " + encode_trusted(payload) + b"\n\n"
