"""A test-only byte-forwarding shim: what a client (or the proxy) really sent.

It sits in front of a server, keeps each request's path, query, headers and
body bytes as they arrived, and forwards them unchanged (the answer is read
whole and passed back). Two of them around ``tapelog proxy`` show both sides
of it: the client's bodies and the upstream's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx

_HOP = frozenset({"host", "content-length", "transfer-encoding", "connection"})
_ANSWER_HOP = frozenset({"content-length", "transfer-encoding", "content-encoding", "connection"})


@dataclass(frozen=True, slots=True)
class Seen:
    """One request as it arrived."""

    path: str
    query: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Recorder:
    """An ASGI app that records and forwards every request to ``target``."""

    target: str
    seen: list[Seen] = field(default_factory=list)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        query = scope["query_string"].decode()
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        self.seen.append(Seen(scope["path"], query, headers, body))
        url = self.target + scope["path"] + (f"?{query}" if query else "")
        sent = {k: v for k, v in headers.items() if k not in _HOP}
        async with httpx.AsyncClient(timeout=120) as client:
            answer = await client.request(scope["method"], url, content=body, headers=sent)
        back = [(k.encode(), v.encode()) for k, v in answer.headers.items() if k not in _ANSWER_HOP]
        await send({"type": "http.response.start", "status": answer.status_code, "headers": back})
        await send({"type": "http.response.body", "body": answer.content})
