"""What a Responses API client gets from the proxy besides the relayed stream.

A non-streaming client (``"stream": false`` or none) gets the ``response``
object of the stream's last event (``response.completed`` or
``response.incomplete``): the provider's whole response, as its non-streamed
answer is shaped, taken as it came rather than rebuilt. A stream that breaks
is ended for a streaming client with an ``error`` event, on which the SDKs
raise.

The provider may keep a response (``store`` true, its default) and a later
request may continue it by id (``previous_response_id``) instead of sending
the conversation again. Then part of the prompt the model sees is not in that
request, so not in its log: each Responses turn's ``turn/end`` reason names the
upstream's ``response_id``, and a request that continues one says where that
response is logged (``previous_response``: ``session`` and ``turn``), or that
it is not (``in_log: false``: the earlier part of the prompt lives only on the
provider). The map from response id to session and turn is the store's
conversation index (``_index``): each turn's point records its response id.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from httpx_sse import ServerSentEvent

from tapelog._errors import JsonValueError
from tapelog.log import decode
from tapelog.log._api import encode_trusted
from tapelog.proxy._index import SessionIndex

__all__ = ["ResponsesAnswer", "note_response_id", "previous_response", "responses_error_event"]

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


def note_response_id(notes: dict[str, Any], data: str) -> None:
    """Keep the upstream's response id from a ``response.created`` event's data."""
    try:
        frame = decode(data)
    except JsonValueError:
        return
    response = frame.get("response") if isinstance(frame, dict) else None
    if isinstance(response, dict) and isinstance(response.get("id"), str):
        notes["response_id"] = response["id"]


def previous_response(
    extras: Mapping[str, Any], index: SessionIndex
) -> tuple[dict[str, Any], str] | None:
    """For a request with ``previous_response_id``: the ``previous_response``
    note and the summary line's words, from the conversation index (which the
    store keeps: any replica, or a restarted proxy, knows every logged
    response); ``None`` for any other request."""
    wanted = extras.get("previous_response_id")
    if wanted is None:
        return None
    found = index.response(wanted) if isinstance(wanted, str) else None
    if found is None:
        note = {"id": wanted, "in_log": False}
        words = (
            f"continues {wanted}, which is not in the log: the earlier part of the "
            "prompt lives only on the provider"
        )
        return note, words
    session_id, turn = found
    note = {"id": wanted, "session": session_id, "turn": turn}
    return note, f"continues {wanted} (logged in {session_id} turn {turn})"
