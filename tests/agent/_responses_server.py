"""A scripted OpenAI Responses endpoint at the network edge (``POST /v1/responses``).

It speaks the real event stream (``llm._responses_events``), answers each
request with the next scripted list of output items, and checks what the
real API checks that matters to a stateless loop: ``store`` is false (so no
server state is relied on), and every reasoning item sent back carries the
``encrypted_content`` this server issued for its id, unaltered (else the
API's 400). Reasoning items are issued with a fresh opaque
``encrypted_content``; each body received is kept, byte for byte.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from llm._responses_events import response_events, sse_bytes

__all__ = ["ResponsesServer"]


class ResponsesServer:
    """The endpoint; ``app`` is its ASGI application."""

    def __init__(self, script: Sequence[Sequence[dict[str, Any]]]) -> None:
        self.script = [list(items) for items in script]
        self.received: list[bytes] = []
        self.issued: dict[str, str] = {}  # reasoning item id -> its encrypted_content
        self.app = Starlette(routes=[Route("/v1/responses", self._respond, methods=["POST"])])

    def _error(self, message: str, code: str, param: str | None = None) -> Response:
        error = {"message": message, "type": "invalid_request_error", "param": param, "code": code}
        return JSONResponse({"error": error}, status_code=400)

    def _check(self, body: dict[str, Any]) -> Response | None:
        if body.get("store") is not False:
            return self._error("this test endpoint keeps no state: send store false", "store")
        for i, item in enumerate(body.get("input", ())):
            if item.get("type") != "reasoning":
                continue
            issued = self.issued.get(item.get("id", ""))
            if issued is None or item.get("encrypted_content") != issued:
                return self._error(
                    f"The encrypted content for item {item.get('id')} could not be verified.",
                    "invalid_encrypted_content",
                    f"input[{i}].encrypted_content",
                )
        return None

    def _issue(self, item: dict[str, Any]) -> dict[str, Any]:
        if item.get("type") != "reasoning":
            return item
        opaque = hashlib.sha256(orjson.dumps(item) + str(len(self.issued)).encode()).hexdigest()
        sealed = {**item, "encrypted_content": f"gAAAAB{opaque}"}
        self.issued[item["id"]] = sealed["encrypted_content"]
        return sealed

    async def _respond(self, request: Request) -> Response:
        raw = await request.body()
        self.received.append(raw)
        body = orjson.loads(raw)
        problem = self._check(body)
        if problem is not None:
            return problem
        items = [self._issue(item) for item in self.script.pop(0)]
        usage = {
            "input_tokens": len(raw) // 4,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 7,
            "output_tokens_details": {"reasoning_tokens": 3},
            "total_tokens": len(raw) // 4 + 7,
        }
        stream = sse_bytes(list(response_events(items, usage=usage)))
        return Response(stream, media_type="text/event-stream")
