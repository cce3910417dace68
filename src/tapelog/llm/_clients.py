"""Streaming provider clients: chat completions, the Responses API and Anthropic Messages.

A client sends exactly ``wire.encode_body(request)`` -- the bytes the audit
path rebuilds from the log -- and turns the Server-Sent Events that come back
into neutral chunks. It holds its own :class:`BodyCache`, so a step encodes
only the messages that are new since the last one, and sends the body as the
parts the wire assembled (:class:`WireBody`), never joined on the way.

The API key is read from the environment (or an injected mapping, for tests)
at send time, put only into a request header, and registered as a secret, so
it is redacted from any error text and from everything logged. A secret a model
streams in two pieces is caught too: while a piece of text ends with what may
be the start of a registered secret, that tail is held back and sent on with
the next piece (see :class:`tapelog.llm.SecretGuard`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Mapping
from typing import Final, Protocol

import httpx
from httpx_sse import ServerSentEvent

from tapelog.llm._anthropic_stream import AnthropicStreamParser
from tapelog.llm._anthropic_wire import AnthropicWire
from tapelog.llm._http import read_api_key, resolve_api_key, stream_sse
from tapelog.llm._openai_stream import OpenAIStreamParser
from tapelog.llm._openai_wire import OpenAIWire
from tapelog.llm._pieces import BodyCache, WireBody
from tapelog.llm._responses_stream import ResponsesStreamParser
from tapelog.llm._responses_wire import ResponsesWire
from tapelog.llm._secret_guard import SecretGuard
from tapelog.llm._types import AbortHandle, LlmRequest, encode_wire_body
from tapelog.llm._wire_common import logged_target
from tapelog.log._api import FrozenDict, has_secrets

__all__ = ["ANTHROPIC_VERSION", "AnthropicClient", "OpenAIClient", "ResponsesClient"]

ANTHROPIC_VERSION: Final = "2023-06-01"
"""The ``anthropic-version`` header sent with every Messages request."""


class _Parser(Protocol):
    done: bool

    def feed(self, event: ServerSentEvent) -> list[FrozenDict]: ...

    def end(self) -> list[FrozenDict]: ...


def _bearer_headers(key: str | None) -> dict[str, str]:
    """The headers of an OpenAI-family request (chat completions and Responses)."""
    headers = {"content-type": "application/json", "accept": "text/event-stream"}
    if key:
        headers["authorization"] = f"Bearer {key}"
    return headers


class _SseClient:
    """What both families share: key, body, transport, abort and the end rule."""

    wire: OpenAIWire | AnthropicWire | ResponsesWire

    def __init__(
        self,
        *,
        provider: str,
        http_client: httpx.AsyncClient,
        base_url: str,
        api_key_env: str | None,
        key_required: bool,
        env: Mapping[str, str] | None,
        cache: BodyCache | None,
    ) -> None:
        self.provider = provider
        self.http = http_client
        self.base_url = base_url.rstrip("/")
        self.api_key_env = api_key_env
        self.key_required = key_required
        self._env = env
        self.cache = cache if cache is not None else BodyCache()
        # Known from now on, not only from the first send: the first request's
        # header (system prompt, tool descriptions) is logged before that send.
        read_api_key(api_key_env, self._environ())

    def _environ(self) -> Mapping[str, str]:
        """Where the key is read from: the ``env`` given, else the process's environment."""
        return self._env if self._env is not None else os.environ

    def _url(self) -> str:
        raise NotImplementedError

    def _headers(self, key: str | None) -> dict[str, str]:
        raise NotImplementedError

    def _parser(self) -> _Parser:
        raise NotImplementedError

    async def aclose(self) -> None:
        """Close the HTTP client (only needed when this client created it)."""
        await self.http.aclose()

    async def stream(
        self, request: LlmRequest, *, abort: AbortHandle, body: bytes | WireBody | None = None
    ) -> AsyncIterator[FrozenDict]:
        """Send ``request`` and yield neutral chunks; ``finish`` comes last.

        On abort the stream stops at once, without a ``finish`` chunk (the
        assembled message is then ``interrupted``). A stream cut before the
        provider's end marker raises a retryable :class:`ProviderError` after
        the chunks that did arrive.
        """
        env = self._environ()
        key = resolve_api_key(self.provider, self.api_key_env, env, required=self.key_required)
        if body is None:
            body = encode_wire_body(self.wire, request, cache=self.cache)
        parser = self._parser()
        url, headers = logged_target(request.header.config, self._url(), self._headers(key))
        guard = SecretGuard(active=has_secrets())
        events = stream_sse(
            self.http,
            provider=self.provider,
            url=url,
            headers=headers,
            body=body,
            abort=abort,
            secret=key,
        )
        try:
            async with contextlib.aclosing(events):
                async for event in events:
                    for chunk in parser.feed(event):
                        for safe in guard.feed(chunk):
                            yield safe
                    if parser.done or abort.aborted:
                        break
            if not abort.aborted:
                for chunk in parser.end():
                    for safe in guard.feed(chunk):
                        yield safe
        except Exception:
            for safe in guard.release():  # what arrived before the error is logged too
                yield safe
            raise
        for safe in guard.release():
            yield safe


class OpenAIClient(_SseClient):
    """``POST {base_url}/chat/completions`` (the base URL includes the version path)."""

    def __init__(
        self,
        *,
        http_client: httpx.AsyncClient,
        base_url: str,
        provider: str = "openai",
        wire: OpenAIWire | None = None,
        api_key_env: str | None = "OPENAI_API_KEY",
        key_required: bool = True,
        env: Mapping[str, str] | None = None,
        cache: BodyCache | None = None,
    ) -> None:
        super().__init__(
            provider=provider,
            http_client=http_client,
            base_url=base_url,
            api_key_env=api_key_env,
            key_required=key_required,
            env=env,
            cache=cache,
        )
        self.wire: OpenAIWire = wire if wire is not None else OpenAIWire(dialect="openai")

    def _url(self) -> str:
        return f"{self.base_url}/chat/completions"

    def _headers(self, key: str | None) -> dict[str, str]:
        return _bearer_headers(key)

    def _parser(self) -> _Parser:
        return OpenAIStreamParser(self.provider)


class ResponsesClient(_SseClient):
    """``POST {base_url}/responses``: the OpenAI Responses API (same key and headers
    as chat completions, its own body and event stream)."""

    def __init__(
        self,
        *,
        http_client: httpx.AsyncClient,
        base_url: str,
        provider: str = "openai",
        wire: ResponsesWire | None = None,
        api_key_env: str | None = "OPENAI_API_KEY",
        key_required: bool = True,
        env: Mapping[str, str] | None = None,
        cache: BodyCache | None = None,
    ) -> None:
        super().__init__(
            provider=provider,
            http_client=http_client,
            base_url=base_url,
            api_key_env=api_key_env,
            key_required=key_required,
            env=env,
            cache=cache,
        )
        self.wire: ResponsesWire = wire if wire is not None else ResponsesWire()

    def _url(self) -> str:
        return f"{self.base_url}/responses"

    def _headers(self, key: str | None) -> dict[str, str]:
        return _bearer_headers(key)

    def _parser(self) -> _Parser:
        return ResponsesStreamParser(self.provider)


class AnthropicClient(_SseClient):
    """``POST {base_url}/v1/messages`` (the base URL is the API root)."""

    def __init__(
        self,
        *,
        http_client: httpx.AsyncClient,
        base_url: str = "https://api.anthropic.com",
        provider: str = "anthropic",
        wire: AnthropicWire | None = None,
        api_key_env: str | None = "ANTHROPIC_API_KEY",
        key_required: bool = True,
        env: Mapping[str, str] | None = None,
        cache: BodyCache | None = None,
    ) -> None:
        super().__init__(
            provider=provider,
            http_client=http_client,
            base_url=base_url,
            api_key_env=api_key_env,
            key_required=key_required,
            env=env,
            cache=cache,
        )
        self.wire: AnthropicWire = wire if wire is not None else AnthropicWire()

    def _url(self) -> str:
        return f"{self.base_url}/v1/messages"

    def _headers(self, key: str | None) -> dict[str, str]:
        headers = {
            "content-type": "application/json",
            "accept": "text/event-stream",
            "anthropic-version": ANTHROPIC_VERSION,
        }
        if key:
            headers["x-api-key"] = key
        return headers

    def _parser(self) -> _Parser:
        return AnthropicStreamParser(self.provider)
