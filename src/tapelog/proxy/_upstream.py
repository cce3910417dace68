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
streams (the log's wires always ask it to), and :class:`SseDecoder` (the
loop's own, from ``tapelog.llm``) splits its bytes into events as they pass
through to the client unchanged.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from tapelog._errors import ProxyError
from tapelog.llm._api import ANTHROPIC_VERSION, SseDecoder, complete_config, provider_spec
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
