"""Passing the upstream's streamed answer to the client while logging it.

The upstream's bytes go to the client unchanged, in the pieces they arrive
in. Each piece is first split into events (``SseDecoder``) and read by the
same stream parser the loop's clients use (``tapelog.llm``), whose neutral
chunks are logged as ``assistant/chunk`` events before the piece is passed on,
through the loop's own hold-back (``tapelog.llm.SecretGuard``): a key split
across frames is logged redacted, never in pieces. The client gets the
upstream's bytes as they were; only the log is redacted.
A non-streaming client gets the answer assembled from the same events
(``_answers``). However the relay ends (the stream's end, an error event, a
cut connection, the client going away), :meth:`Relay.finish` logs the turn's
end exactly once and hands the session back. A stream that breaks (the
connection drops, or it ends without its end marker) is logged as an error
and ended for the client with its API's error event, so its SDK raises rather
than return the partial answer as if it were whole.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

import httpx
from httpx_sse import ServerSentEvent
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from tapelog._errors import ProviderError
from tapelog.llm._api import (
    AnthropicStreamParser,
    OpenAIStreamParser,
    ResponsesStreamParser,
    SecretGuard,
)
from tapelog.log import redact, secret_scope
from tapelog.log._api import FrozenDict, has_secrets, scoped_secrets
from tapelog.proxy._answers import error_body
from tapelog.proxy._exchange import Exchange
from tapelog.proxy._responses_out import note_response_id, responses_error_event
from tapelog.proxy._types import Family
from tapelog.proxy._upstream import SseDecoder

__all__ = ["ClosingResponse", "Relay", "RelayResponse"]

_EXCERPT = 300
_HOP = frozenset(
    {
        "connection",
        "content-encoding",
        "content-length",
        "keep-alive",
        "set-cookie",
        "transfer-encoding",
    }
)


class _Parser(Protocol):
    done: bool

    def feed(self, event: ServerSentEvent) -> list[FrozenDict]: ...

    def end(self) -> list[FrozenDict]: ...


class _Answer(Protocol):
    def feed(self, event: ServerSentEvent) -> None: ...


def passed_headers(headers: httpx.Headers) -> dict[str, str]:
    """The upstream's response headers a client may see (not the hop-by-hop ones)."""
    return {k: v for k, v in headers.items() if k.lower() not in _HOP}


def stream_error_event(family: Family, message: str) -> bytes:
    """The event that ends a broken stream as the client's API ends one with an
    error: OpenAI sends ``data: {"error": {...}}``, Anthropic ``event: error``;
    each SDK raises when it reads it."""
    if family == "responses":
        return responses_error_event(f"tapelog proxy: {message}")
    body = error_body(family, 502, f"tapelog proxy: {message}")
    head = b"event: error\n" if family == "anthropic" else b""
    return head + b"data: " + body + b"\n\n"


def error_of(exc: BaseException, provider: str) -> dict[str, Any]:
    """A logged error object: type and a bounded, redacted message."""
    if isinstance(exc, httpx.HTTPError):
        message = f"the connection to {provider} failed ({type(exc).__name__})"
    else:
        message = redact(str(exc))
    if len(message) > _EXCERPT:
        message = message[: _EXCERPT - 1] + "…"
    error: dict[str, Any] = {"type": type(exc).__name__, "message": message}
    status = getattr(exc, "status", None)
    if isinstance(status, int):
        error["status"] = status
    return error


class Relay:
    """One upstream answer being relayed and logged (see the module docstring)."""

    def __init__(
        self,
        *,
        response: httpx.Response,
        exchange: Exchange,
        family: Family,
        provider: str,
        answer: _Answer | None,
        done: Callable[[Exchange, bool, int, asyncio.Future[None]], Awaitable[None]],
    ) -> None:
        self.response = response
        self.exchange = exchange
        self.provider = provider
        self.answer = answer
        self._done = done
        self._decoder = SseDecoder()
        parser: _Parser
        if family == "anthropic":
            parser = AnthropicStreamParser(provider)
        elif family == "responses":
            parser = ResponsesStreamParser(provider)
        else:
            parser = OpenAIStreamParser(provider)
        self._parser: _Parser | None = parser
        self.family = family
        self._guard = SecretGuard(active=has_secrets())
        self.error: dict[str, Any] | None = None
        # What the upstream sent already makes the client's SDK raise (its
        # own error event, or an event that is not JSON): nothing to add.
        self.told = False
        self.completed = False
        self.finished = False
        self.answered: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        """Done once the client has the answer's end (:meth:`close`): the turn's
        sync and release wait for it, so they never delay that end."""

    def _read(self, events: list[ServerSentEvent]) -> None:
        for event in events:
            if self.answer is not None:
                self.answer.feed(event)
            if event.event == "response.created" and self.family == "responses":
                note_response_id(self.exchange.notes, event.data)
            parser = self._parser
            if parser is None or parser.done:
                continue
            try:
                chunks = parser.feed(event)
            except ProviderError as exc:
                self.error, self._parser = error_of(exc, self.provider), None
                self.told = True
                continue
            self._log(chunks)

    def _log(self, chunks: list[FrozenDict]) -> None:
        for chunk in chunks:
            for safe in self._guard.feed(chunk):
                self.exchange.chunk(safe)

    def _end_of_stream(self) -> None:
        if self._parser is not None:
            try:
                self._log(self._parser.end())
            except ProviderError as exc:
                self.error = error_of(exc, self.provider)
            self._parser = None
        self.completed = self.error is None

    async def pieces(self) -> AsyncIterator[bytes]:
        """The upstream's bytes as they arrive, each logged before it is yielded.

        The piece that ends the answer (``[DONE]``, ``message_stop``) is passed
        on only after the turn's end is logged and written (a killed proxy
        keeps it; it is synced right after, ``_turn_end``): a client that has
        the whole answer is never ahead of the log.
        """
        try:
            async for data in self.response.aiter_bytes():
                self._read(self._decoder.feed(data))
                if self._parser is not None and self._parser.done:
                    self._end_of_stream()
                    await self.finish()
                yield data
            if not self.finished:
                self._read(self._decoder.end())
                unterminated = self._parser is not None and not self._parser.done
                self._end_of_stream()
                if unterminated and self.error is None:
                    self.error, self.completed = self._truncated(), False
        except httpx.HTTPError as exc:
            if not self.finished:
                self.error = error_of(exc, self.provider)
                self.error["message"] = (
                    f"the connection to {self.provider} broke before the answer ended "
                    f"({type(exc).__name__}); the partial answer is logged and the request "
                    "can be retried"
                )
        finally:
            await self.finish()
        if self.error is not None and self.answer is None and not self.told:
            # The client has a 200 and part of an answer: only an error event in
            # its API's own shape makes its SDK raise instead of returning the part.
            yield stream_error_event(self.family, self.error["message"])

    def _truncated(self) -> dict[str, Any]:
        markers = {"anthropic": "message_stop", "responses": "response.completed"}
        marker = markers.get(self.family, "[DONE]")
        return error_of(
            ProviderError(
                f"The {self.provider} stream ended without {marker}; the partial answer is "
                "logged and the request can be retried."
            ),
            self.provider,
        )

    async def finish(self) -> None:
        """Log how the answer ended (once) and hand the session back."""
        if self.finished:
            return
        self.finished = True
        for safe in self._guard.release():  # what was held back is logged before the end
            self.exchange.chunk(safe)
        aborted = not self.completed and self.error is None
        if self.completed:
            self.exchange.finish()
        elif self.error is not None:
            self.exchange.finish(error=self.error)
        else:
            self.exchange.finish(aborted="client-disconnected")
        # A streaming client already has its 200; a JSON client gets a 502 for an error.
        status = 502 if self.error is not None and self.answer is not None else 200
        await self._done(self.exchange, aborted, status, self.answered)

    async def close(self) -> None:
        """After the client has the answer's end (or is gone): let the turn's
        end go on and close the upstream's response. Every user of
        :meth:`pieces` calls it, however the answer ended."""
        if not self.answered.done():
            self.answered.set_result(None)
        with contextlib.suppress(Exception):
            await self.response.aclose()


class RelayResponse(Response):
    """A streamed answer, as a plain ASGI response: the upstream's pieces as
    they arrive, the end of the message as soon as the upstream's ends, and
    only then the turn's remaining bookkeeping (:meth:`Relay.close`). The relay
    is finished however the response ends, also when the client leaves before
    the first byte: a client that disconnects stops the relay (its turn logged
    as aborted)."""

    def __init__(self, relay: Relay, *, status_code: int, headers: dict[str, str]) -> None:
        self.relay = relay
        self.status_code = status_code
        self.media_type = None
        self.background = None
        self.init_headers(headers)
        self.secrets = scoped_secrets()  # the request's, in force again while streaming

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        with secret_scope(self.secrets):
            try:
                await until_disconnect(self._stream(send), receive)
            finally:
                await self.relay.finish()
                await self.relay.close()

    async def _stream(self, send: Send) -> None:
        start = {"type": "http.response.start", "status": self.status_code}
        await send({**start, "headers": self.raw_headers})
        async for data in self.relay.pieces():
            await send({"type": "http.response.body", "body": data, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


class ClosingResponse(Response):
    """A whole answer built from a relay (a client that did not ask for a
    stream), whose relay is closed once it has been sent, however sending ends."""

    def __init__(self, relay: Relay, content: bytes, **options: Any) -> None:
        super().__init__(content, **options)
        self.relay = relay

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self.relay.close()


async def until_disconnect(work: Awaitable[None], receive: Receive) -> None:
    """Run ``work`` (sending a response) in this task, cancelled if the client
    disconnects before it is done; a disconnect is no error. One watching
    task per response (what Starlette's streamed response does with a task
    group, at a fraction of the cost)."""
    task = asyncio.current_task()
    assert task is not None
    state = {"done": False, "left": False}

    async def watch() -> None:
        while True:
            try:
                message: Message = await receive()
            except Exception:  # the server's to report; the response goes on
                return
            if message["type"] == "http.disconnect":
                if not state["done"]:
                    state["left"] = True
                    task.cancel()
                return

    watcher = asyncio.ensure_future(watch())
    try:
        await work
    except asyncio.CancelledError:
        if not state["left"] or task.uncancel():
            raise  # cancelled from outside as well: not only the client's leaving
    finally:
        state["done"] = True
        watcher.cancel()
