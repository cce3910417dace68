"""The proxy reads the upstream's stream in whatever pieces the network gives it.

The bytes are passed on as they arrive and split into events on the side;
however a stream is cut into pieces (a CRLF split in two, a multi-byte
character split across pieces), the events are those of the whole stream.
"""

from __future__ import annotations

import itertools

import httpx
from httpx_sse import EventSource
from hypothesis import given, settings
from hypothesis import strategies as st

from tapelog.proxy._upstream import SseDecoder

STREAM = (
    b": keep-alive\r\n\r\n"
    b'data: {"choices":[{"delta":{"content":"h\xc3\xa9llo"}}]}\r\n\r\n'
    b'event: message_delta\ndata: {"a":1}\ndata: {"b":2}\n\n'
    b"id: 7\rdata: caf\xc3\xa9 \xe2\x82\xac\r\r"
    b"data: [DONE]\n\n"
)


def _reference() -> list[tuple[str, str, str]]:
    response = httpx.Response(200, headers={"content-type": "text/event-stream"}, content=STREAM)
    return [(e.event, e.data, e.id) for e in EventSource(response).iter_sse()]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, len(STREAM)), max_size=12))
def test_events_do_not_depend_on_where_the_bytes_are_cut(cuts: list[int]) -> None:
    bounds = [0, *sorted(cuts), len(STREAM)]
    decoder = SseDecoder()
    events = []
    for start, end in itertools.pairwise(bounds):
        events += decoder.feed(STREAM[start:end])
    events += decoder.end()
    assert [(e.event, e.data, e.id) for e in events] == _reference()
    assert len(events) == 4
