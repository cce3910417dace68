"""The upstream: where the proxy sends, what it passes on, and how it reads answers.

The proxy sends the body rebuilt from the log with the client's own
credentials: the ``Authorization``, ``x-api-key``, ``api-key``,
``anthropic-version``, ``anthropic-beta``, ``OpenAI-Organization`` and
``OpenAI-Project`` headers are passed on as they came and nothing else of the
client's request is. The credentials are that request's secrets
(:func:`client_secrets`): the proxy redacts them from everything the request
logs, from its first byte on (``tapelog.log.secret_scope``), so an upstream or
a model that echoes a key has it redacted from the log; they are never
logged, printed or put in an error. They are not registered process-wide: one
client's key never changes another client's log. The upstream always
streams (the log's wires always ask it to), and :class:`SseDecoder` splits
its bytes into events as they pass through to the client unchanged.
"""

from __future__ import annotations

import codecs
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from httpx_sse import ServerSentEvent

from tapelog._errors import ProxyError
from tapelog.llm._api import ANTHROPIC_VERSION, complete_config, provider_spec
from tapelog.log._api import LlmCallConfig
from tapelog.proxy._types import Family

__all__ = ["FORWARDED_HEADERS", "SseDecoder", "Upstream", "client_secrets", "upstream_headers"]

FORWARDED_HEADERS: Final = (
    "authorization",
    "x-api-key",
    "api-key",
    "anthropic-version",
    "openai-organization",
    "openai-project",
)
"""The client request headers passed on to the upstream (credentials and API versions).
Headers that change what the model reads (``anthropic-beta``) are sent from the
logged ``config.headers`` instead (``logged_target``)."""

_SECRET_HEADERS: Final = ("authorization", "x-api-key", "api-key")
_SCHEMES: Final = frozenset({"bearer", "basic", "token"})


@dataclass(frozen=True, slots=True, kw_only=True)
class Upstream:
    """Where the proxy forwards: a provider name (logged in every config), its
    wire family and dialect, and its base URL (not logged: a machine's detail)."""

    provider: str
    family: Family
    dialect: str | None
    base_url: str

    @classmethod
    def resolve(cls, target: str, *, base_url: str | None = None) -> Upstream:
        """``target`` is a provider name (built in, preset or registered) or an
        ``http(s)://`` base URL of an OpenAI-compatible server (the
        ``compatible`` provider); ``base_url`` overrides a named provider's URL."""
        if "://" in target:
            if base_url is not None:
                raise ProxyError("give the upstream as a URL or as a provider with --base-url")
            return cls(
                provider="compatible",
                family="openai",
                dialect="compatible",
                base_url=_checked_url(target),
            )
        spec = provider_spec(target)
        if spec.family not in ("openai", "anthropic"):
            raise ProxyError(
                f"the {target} provider runs in-process, not over HTTP; the proxy forwards to "
                "an OpenAI- or Anthropic-compatible server"
            )
        url = base_url or spec.base_url
        if url is None:
            raise ProxyError(
                f"the {target} provider has no default base URL; give one with --base-url"
            )
        return cls(
            provider=spec.name,
            family=spec.family,
            dialect=spec.dialect,
            base_url=_checked_url(url),
        )

    @property
    def url(self) -> str:
        """The endpoint: ``{base}/chat/completions`` or ``{base}/v1/messages``."""
        if self.family == "anthropic":
            return f"{self.base_url}/v1/messages"
        return f"{self.base_url}/chat/completions"

    def endpoint(self, client: Family) -> str:
        """The endpoint a client's request goes to: :attr:`url`, or
        ``{base}/responses`` for a Responses API client."""
        return f"{self.base_url}/responses" if client == "responses" else self.url

    def serves(self, client: Family) -> bool:
        """Whether a client of this API can be forwarded here (the Responses
        API is OpenAI's: an upstream of the ``openai`` family, but not DeepSeek,
        which has none; an OpenAI-compatible server may)."""
        if client == "responses":
            return self.family == "openai" and self.dialect != "deepseek"
        return client == self.family

    def config(self, **fields: object) -> LlmCallConfig:
        """A call config for this upstream (its wire identity completed)."""
        return complete_config(LlmCallConfig(provider=self.provider, **fields))  # type: ignore[arg-type]


def _checked_url(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ProxyError(f"the upstream base URL must be an http:// or https:// URL, not {url!r}")
    if parts.username is not None or parts.password is not None:
        raise ProxyError(
            "the upstream base URL must not contain credentials; clients send their own keys"
        )
    return url.rstrip("/")


def client_secrets(client: Mapping[str, str]) -> list[str]:
    """The credentials of a client's request: each key header's value, or the
    token after a ``Bearer``, ``Basic`` or ``Token`` scheme (the scheme word
    itself is no secret)."""
    found: list[str] = []
    for name in _SECRET_HEADERS:
        value = client.get(name)
        if value is None:
            continue
        scheme, _, token = value.strip().partition(" ")
        found.append(token.strip() if token and scheme.lower() in _SCHEMES else value)
    return found


def upstream_headers(client: Mapping[str, str], family: Family) -> dict[str, str]:
    """The headers of the upstream request: the client's credentials and API
    versions, JSON in, an event stream out."""
    headers = {
        "content-type": "application/json",
        "accept": "text/event-stream",
        "accept-encoding": "identity",
    }
    for name in FORWARDED_HEADERS:
        value = client.get(name)
        if value is None:
            continue
        headers[name] = value
    if family == "anthropic":
        headers.setdefault("anthropic-version", ANTHROPIC_VERSION)
    return headers


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
