"""The HTTP edge shared by the streaming clients: send, map errors, read SSE.

Both provider families POST the serializer's exact bytes (a :class:`WireBody`
goes out in chunks with its ``Content-Length``, never joined) and read Server-Sent
Events back; what differs is the URL, the headers and how events become
chunks. This module owns the part that is the same: an injected
``httpx.AsyncClient`` (so the emulator plugs in as an ASGI transport and tests
as ``httpx.MockTransport``), events split by the one :class:`SseDecoder`,
every answer read to the end of its HTTP message so the connection is kept
alive for the next call (:func:`stream_sse`), errors mapped to :class:`ProviderError` with
status, body excerpt, request id (never the API key) and the delay the server
asked for before a retry (:func:`parse_retry_after`), and an abort that is
raced against every read so a stop takes effect at once.

:func:`read_api_key` registers each key it reads with
:func:`tapelog.log.register_secret`, so the key is redacted from everything
logged (and every error text here) in any form a provider may echo it in. The
clients read it when they are made (so their first request's header, logged
before the first send, already has it redacted) and again at each send (a
key may rotate: the new one is registered too).
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import math
import re
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from datetime import UTC
from typing import Any, Final, TypeVar

import httpx
from httpx_sse import ServerSentEvent

from tapelog._errors import Aborted, ContextOverflowError, JsonValueError, ProviderError
from tapelog.llm._pieces import WireBody
from tapelog.llm._sse import SseDecoder
from tapelog.llm._types import AbortHandle
from tapelog.log import decode, redact, register_secret

__all__ = [
    "REQUEST_ID_CHARS",
    "error_from_response",
    "event_frame",
    "parse_retry_after",
    "read_api_key",
    "resolve_api_key",
    "sized_content",
    "stream_sse",
]

T = TypeVar("T")

_EXCERPT = 300
REQUEST_ID_CHARS: Final = 120
"""The longest request id kept (an id is tens of characters; more is no id)."""
_UNPRINTABLE: Final = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_OVERFLOW_MARKERS = (
    "context_length_exceeded",
    "maximum context length",
    "context length",
    "prompt is too long",
    "too many tokens",
)


_KEY_CHARS: Final = re.compile(r"[\x21-\x7e]+")
"""What an API key may contain: visible ASCII, which any HTTP header accepts."""

_DELAY: Final = re.compile(r"[0-9]+(?:\.[0-9]*)?|\.[0-9]+")
"""A delay in a retry header: a non-negative decimal number (delay-seconds is an
integer by the standard; servers and the official SDKs also use fractions)."""
_DELAY_TEXT: Final = 64
"""The longest retry header value read: anything longer is no delay or date."""


def read_api_key(env_var: str | None, env: Mapping[str, str]) -> str | None:
    """The API key in ``env_var``, if set, registered as a secret
    (:func:`tapelog.log.register_secret`): from then on it is redacted wherever
    tapelog logs or shows text."""
    key = env.get(env_var) if env_var else None
    if key:
        register_secret(key)
    return key or None


def resolve_api_key(
    provider: str, env_var: str | None, env: Mapping[str, str], *, required: bool
) -> str | None:
    """The API key from the environment; a clear error before any network if missing.

    The key is registered (:func:`read_api_key`) even when refused below.
    """
    key = read_api_key(env_var, env)
    if key:
        # An HTTP header refuses whitespace and non-ASCII, and httpx/h11 would
        # then quote the whole header, key included, in their error message.
        if not _KEY_CHARS.fullmatch(key):
            raise ProviderError(
                f"The {provider} API key in {env_var} contains whitespace, a control "
                "character or a non-ASCII character (a newline copied with it?); set "
                f"{env_var} to the key alone."
            )
        return key
    if required:
        raise ProviderError(
            f"The {provider} provider needs an API key: set {env_var} in the environment "
            "(keys are read from the environment only and never logged)."
        )
    return None


def _redact(text: str, secret: str | None) -> str:
    """``text`` with the key and every registered secret replaced by ``***`` (a
    "key" of one to three characters is no key, and blanking every such
    substring garbles the text; keys of eight or more are registered secrets,
    also found JSON-escaped, base64- or URL-encoded)."""
    if secret and len(secret) >= 4:
        text = text.replace(secret, "***")
    return redact(text)


def _excerpt(text: str, secret: str | None) -> str:
    text = _redact(text, secret)
    flat = " ".join(text.split())
    return flat if len(flat) <= _EXCERPT else flat[: _EXCERPT - 1] + "…"


def _error_fields(text: str) -> tuple[str, str]:
    """The provider's error message and code/type, when the body is the usual JSON."""
    try:
        body: Any = decode(text)
    except Exception:
        return "", ""
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        message = error.get("message")
        code = error.get("code") or error.get("type") or ""
        return (message if isinstance(message, str) else ""), str(code)
    if isinstance(error, str):
        return error, ""
    return "", ""


def _delay(value: str | None) -> float | None:
    """A non-negative, finite number of a retry header (``None``: not one)."""
    if value is None or len(value) > _DELAY_TEXT:
        return None
    text = value.strip()
    if not _DELAY.fullmatch(text):
        return None
    number = float(text)
    return number if math.isfinite(number) else None


def parse_retry_after(
    headers: Mapping[str, str], *, now: Callable[[], float] = time.time
) -> float | None:
    """The delay in seconds (>= 0) a server asked for before a retry, or ``None``.

    ``retry-after-ms`` (milliseconds) is read first, then ``Retry-After``: a
    number of seconds or an HTTP date (a date already past is 0), the order
    the official OpenAI and Anthropic SDKs use (docs/providers.md, "Retry-After").
    The header is a hint from an untrusted server, never an error: a value
    that is none of those (negative, not finite, garbled, overlong) is ignored.
    ``now`` gives the current time (epoch seconds) a date is measured from.
    """
    millis = _delay(headers.get("retry-after-ms"))
    if millis is not None:
        return millis / 1000
    value = headers.get("retry-after")
    seconds = _delay(value)
    if seconds is not None or value is None or len(value) > _DELAY_TEXT:
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(value)
        if when.tzinfo is None:  # an HTTP date is in GMT whatever it says
            when = when.replace(tzinfo=UTC)
        wait = when.timestamp() - now()
    except (ValueError, TypeError, OverflowError, IndexError):
        return None
    return max(0.0, wait) if math.isfinite(wait) else None


def _seconds(delay: float) -> str:
    return f"{round(delay, 3):g} s"


def error_from_response(
    provider: str, status: int, text: str, headers: httpx.Headers, secret: str | None
) -> ProviderError:
    """A non-2xx answer as a ProviderError (or ContextOverflowError), with the
    delay its headers asked for before a retry (``retry_after``)."""
    request_id = _request_id(headers, secret)
    excerpt = _excerpt(text, secret)
    message, code = _error_fields(text)
    rid = f" (request id {request_id})" if request_id else ""
    probe = f"{code} {message or text}".lower()
    if status in (400, 413) and any(marker in probe for marker in _OVERFLOW_MARKERS):
        return ContextOverflowError(
            f"{provider} rejected the request as too long for the model (HTTP {status}): "
            f"{excerpt}{rid}. Compact the session or use a model with a larger context.",
            status=status,
            body=excerpt,
            request_id=request_id,
            retryable=False,
        )
    retryable = status in (408, 409, 429) or status >= 500
    retry_after = parse_retry_after(headers)
    if status == 429 and retry_after:
        advice = f"Rate limited; the provider asks to wait {_seconds(retry_after)} before retrying."
    elif status == 429:
        advice = "Rate limited; wait and retry, or lower the request rate."
    elif status in (401, 403):
        advice = "Check that the API key in the environment is valid for this provider."
    elif retryable:
        advice = "The provider had a server-side problem; retrying may help."
        if retry_after:
            advice += f" It asks to wait {_seconds(retry_after)} before retrying."
    else:
        advice = "Fix the request or the provider settings named in the message."
    return ProviderError(
        f"{provider} answered HTTP {status}: {excerpt}{rid}. {advice}",
        status=status,
        body=excerpt,
        request_id=request_id,
        retryable=retryable,
        retry_after=retry_after,
    )


def _request_id(headers: httpx.Headers, secret: str | None) -> str | None:
    """The provider's request id, as shown and kept: redacted (a proxy or a
    provider may echo the key there), control characters made spaces, at most
    :data:`REQUEST_ID_CHARS` characters."""
    raw = headers.get("x-request-id") or headers.get("request-id")
    if not raw:
        return None
    text = _UNPRINTABLE.sub(" ", _redact(raw, secret))
    if len(text) > REQUEST_ID_CHARS:
        text = text[: REQUEST_ID_CHARS - 1] + "…"
    return text


async def _race(awaitable: Awaitable[T], abort_task: asyncio.Future[None]) -> T:
    """Await ``awaitable`` unless the abort fires first (then raise :class:`Aborted`)."""
    task: asyncio.Future[T] = asyncio.ensure_future(awaitable)
    waiting: set[asyncio.Future[Any]] = {task, abort_task}
    done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
    if task in done:
        return task.result()
    task.cancel()
    with contextlib.suppress(BaseException):
        await task
    raise Aborted


def _transport_error(provider: str, exc: httpx.HTTPError, secret: str | None) -> ProviderError:
    if isinstance(exc, httpx.TimeoutException):
        what = "timed out"
    else:
        text = _redact(str(exc), secret)
        what = f"failed ({type(exc).__name__}: {text})"
    return ProviderError(
        f"The connection to {provider} {what}; check the network and base URL, "
        "or retry (this error is retryable).",
        retryable=True,
    )


def event_frame(provider: str, data: str) -> dict[str, Any] | None:
    """The JSON object an event carries (``None``: blank or not an object, ignored).

    Both stream parsers read their frames this way, so a garbled event is the
    same retryable :class:`ProviderError` whichever family sent it.
    """
    if not data.strip():
        return None
    try:
        frame = decode(data, path="event")
    except JsonValueError as exc:
        raise ProviderError(
            f"{provider} sent a stream event that is not JSON ({redact(exc.problem)}); "
            "retrying may help.",
            retryable=True,
        ) from None
    return frame if isinstance(frame, dict) else None


async def stream_sse(
    http: httpx.AsyncClient,
    *,
    provider: str,
    url: str,
    headers: Mapping[str, str],
    body: bytes | WireBody,
    abort: AbortHandle,
    secret: str | None,
) -> AsyncGenerator[ServerSentEvent, None]:
    """POST ``body`` and yield its Server-Sent Events until the stream ends or aborts.

    A :class:`WireBody` is sent as its chunks with an explicit ``Content-Length``
    (:func:`sized_content`): the same bytes as the joined body, no chunked transfer
    encoding, and no copy of the whole body on the way.

    Comments (``:`` lines) and unknown fields never reach the caller. On abort
    the iteration simply stops and the response is closed. When the caller
    stops early (its parser saw the end marker), the rest of the HTTP message
    is read before the response is released (:func:`_release`), so the
    connection goes back to the client's pool for the session's next call.
    """
    if abort.aborted:
        return
    abort_task: asyncio.Future[None] = asyncio.ensure_future(abort.wait())
    response: httpx.Response | None = None
    chunks: AsyncIterator[bytes] | None = None
    stopped = False  # the caller closed this generator at one of its events
    try:
        content, sized = sized_content(body, headers)
        request = http.build_request("POST", url, content=content, headers=sized)
        try:
            response = await _race(http.send(request, stream=True), abort_task)
        except Aborted:
            return
        except httpx.HTTPError as exc:
            raise _transport_error(provider, exc, secret) from exc
        if not 200 <= response.status_code < 300:
            try:
                text = (await _race(response.aread(), abort_task)).decode("utf-8", "replace")
            except Aborted:
                return
            except httpx.HTTPError:
                text = ""
            raise error_from_response(
                provider, response.status_code, text, response.headers, secret
            )
        _check_event_stream(provider, response, secret)
        decoder = SseDecoder()
        chunks = response.aiter_bytes()
        while True:
            try:
                data = await _race(anext(chunks), abort_task)
            except (Aborted, StopAsyncIteration):
                break
            except httpx.HTTPError as exc:
                raise _transport_error(provider, exc, secret) from exc
            for event in decoder.feed(data):
                # One piece may hold many events: a stop between two of them
                # takes effect at once, as it does between two reads.
                await asyncio.sleep(0)
                if abort.aborted:
                    return
                try:
                    yield event
                except GeneratorExit:
                    stopped = True
                    raise
        if not abort.aborted:
            for event in decoder.end():
                yield event
    finally:
        abort_task.cancel()
        if response is not None:
            await _release(response, chunks if stopped and not abort.aborted else None)


def sized_content(
    body: bytes | WireBody, headers: Mapping[str, str]
) -> tuple[bytes | AsyncIterator[bytes], dict[str, str]]:
    """What httpx sends for ``body``, and the headers to send it with (the
    clients' and the proxy's upstream send both go through here).

    httpx frames an async iterator with ``Transfer-Encoding: chunked`` unless
    the request names its ``Content-Length``; naming it keeps the framing a
    plain sized body, which every provider accepts (and h11 checks that
    exactly that many bytes go out).
    """
    sized = {k: v for k, v in headers.items() if k.lower() != "content-length"}
    if isinstance(body, bytes):
        return body, sized
    sized["content-length"] = str(len(body))
    return _chunks(body), sized


async def _chunks(body: WireBody) -> AsyncIterator[bytes]:
    for chunk in body.chunks():
        yield chunk


_DRAIN_BYTES: Final = 64 * 1024
_DRAIN_SECONDS: Final = 1.0


async def _release(response: httpx.Response, rest: AsyncIterator[bytes] | None) -> None:
    """Close ``response``, first reading what is ``rest`` of its message.

    An answer's end marker (``[DONE]``, ``message_stop``) is its last event,
    but not the end of its HTTP message: the chunked body's last chunk (or the
    rest of a ``Content-Length``) follows. A response closed before that makes
    httpx drop the connection; one read to the end hands it back to the pool,
    so a session keeps one connection per provider. What follows the end
    marker is normally a few bytes at once; an upstream that sends more than
    :data:`_DRAIN_BYTES` or takes longer than :data:`_DRAIN_SECONDS` has its
    connection dropped instead.
    """
    if rest is not None:
        read = 0
        with contextlib.suppress(Exception):
            async with asyncio.timeout(_DRAIN_SECONDS):
                async for data in rest:
                    read += len(data)
                    if read > _DRAIN_BYTES:
                        break
    await response.aclose()


def _check_event_stream(provider: str, response: httpx.Response, secret: str | None) -> None:
    """Refuse a 2xx answer that is no event stream (a wrong base URL, most often)."""
    content_type = response.headers.get("content-type", "").partition(";")[0]
    if "text/event-stream" not in content_type:
        raise ProviderError(
            f"{provider} did not answer with an event stream (its content type is "
            f"{_redact(content_type, secret)[:_EXCERPT]!r}); "
            "check that the base URL points at the provider's API.",
            status=response.status_code,
        )
