"""The provider table: name -> wire family, dialect, base URL and key variable.

``wire_for(config)`` is pure and needs nothing but the logged config: it is
what the audit path uses to rebuild request bytes from the log alone.
``make_client`` adds what must never be logged (the API key, read from the
environment at send time) and what is local to a machine (base URL, HTTP client).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, get_args

import httpx

from tapelog._errors import ClientMismatchError, HeaderError, ProviderError
from tapelog.llm._anthropic_wire import AnthropicWire
from tapelog.llm._clients import AnthropicClient, OpenAIClient
from tapelog.llm._openai_wire import OpenAIDialect, OpenAIWire, ReasoningSendBack
from tapelog.llm._types import ProviderClient, WireFormat
from tapelog.log import LlmCallConfig
from tapelog.request import LlmRequest

__all__ = [
    "DEFAULT_MODELS",
    "PROVIDERS",
    "WIRE_OPTIONS",
    "ProviderSpec",
    "client_wire",
    "encode_request",
    "make_client",
    "provider_spec",
    "wire_for",
    "wire_named",
]

EMULATOR_BASE_URL: Final = "http://emulator/v1"


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderSpec:
    """How to reach one provider. ``key_required=False`` sends a key only if set."""

    name: str
    family: Literal["openai", "anthropic", "local"]
    dialect: OpenAIDialect | None
    base_url: str | None
    api_key_env: str | None
    key_required: bool


PROVIDERS: Final[Mapping[str, ProviderSpec]] = {
    spec.name: spec
    for spec in (
        ProviderSpec(
            name="anthropic",
            family="anthropic",
            dialect=None,
            base_url="https://api.anthropic.com",
            api_key_env="ANTHROPIC_API_KEY",
            key_required=True,
        ),
        # Any OpenAI-compatible server (vLLM, llama.cpp, Ollama, SGLang): the
        # base URL is required; OPENAI_API_KEY is sent when set.
        ProviderSpec(
            name="compatible",
            family="openai",
            dialect="compatible",
            base_url=None,
            api_key_env="OPENAI_API_KEY",
            key_required=False,
        ),
        ProviderSpec(
            name="deepseek",
            family="openai",
            dialect="deepseek",
            base_url="https://api.deepseek.com",
            api_key_env="DEEPSEEK_API_KEY",
            key_required=True,
        ),
        # The in-process emulator (tapelog.emulator), reached through an ASGI
        # transport; the host name is never resolved.
        ProviderSpec(
            name="emulator",
            family="openai",
            dialect="compatible",
            base_url=EMULATOR_BASE_URL,
            api_key_env=None,
            key_required=False,
        ),
        ProviderSpec(
            name="local",
            family="local",
            dialect="compatible",
            base_url=None,
            api_key_env=None,
            key_required=False,
        ),
        ProviderSpec(
            name="openai",
            family="openai",
            dialect="openai",
            base_url="https://api.openai.com/v1",
            api_key_env="OPENAI_API_KEY",
            key_required=True,
        ),
    )
}

DEFAULT_MODELS: Final[Mapping[str, str]] = {
    # Dated defaults (late 2026) for the CLI when no model is given; every
    # request logs the model it used, so changing these never changes a log.
    "anthropic": "claude-sonnet-4-5",
    "deepseek": "deepseek-chat",
    "emulator": "emulator-1",
    "local": "smollm2-135m",
    "openai": "gpt-4.1-mini",
}


def provider_spec(name: str) -> ProviderSpec:
    """The table entry for ``name``, or a clear error naming the known providers."""
    spec = PROVIDERS.get(name)
    if spec is None:
        raise HeaderError(
            f"config.provider {name!r} is not a known provider; use one of "
            f"{', '.join(sorted(PROVIDERS))}."
        )
    return spec


WIRE_OPTIONS: Final[Mapping[str, tuple[str, ...]]] = {
    "openai": ("reasoning_send_back",),
    "anthropic": (),
    "local": ("reasoning_send_back",),
}
"""The ``config.wire`` options each wire family reads (docs/providers.md)."""


def _send_back(spec: ProviderSpec, options: Mapping[str, Any]) -> ReasoningSendBack | None:
    allowed = WIRE_OPTIONS[spec.family]
    unknown = [k for k in options if k not in allowed]
    if unknown:
        known = ", ".join(allowed) or "none"
        raise HeaderError(
            f"config.wire has the option {unknown[0]!r}, which the {spec.name} wire does not "
            f"read (its options: {known})."
        )
    value = options.get("reasoning_send_back")
    if value is not None and value not in get_args(ReasoningSendBack):
        raise HeaderError(
            f"config.wire.reasoning_send_back must be one of "
            f"{', '.join(get_args(ReasoningSendBack))}, got {value!r}."
        )
    return value


def wire_for(config: LlmCallConfig) -> OpenAIWire | AnthropicWire:
    """The serializer for a logged config (pure: no environment, no network).

    The config alone decides it: the provider's wire family and dialect, and
    the wire options in ``config.wire``. The ``local`` provider serializes with
    the compatible OpenAI dialect too (its client parses that body for llama.cpp).
    """
    spec = provider_spec(config.provider)
    send_back = _send_back(spec, config.wire)
    if spec.family == "anthropic":
        return AnthropicWire()
    assert spec.dialect is not None
    return OpenAIWire(dialect=spec.dialect, send_back=send_back)


_BUILT_IN_WIRES: Final = (OpenAIWire, AnthropicWire)


def client_wire(client: ProviderClient, config: LlmCallConfig, *, checked: bool) -> WireFormat:
    """The wire ``client`` serializes with, once it is known to be the one the
    logged ``config`` implies; otherwise :class:`ClientMismatchError`, before
    anything is sent.

    The provider must be the config's, and a built-in wire format must equal
    ``wire_for(config)`` (dialect and every wire option). A custom wire format
    cannot be compared by value: it is accepted only when the invariant checker
    (``checked``) will compare its bytes with the rebuild.
    """
    if client.provider != config.provider:
        raise ClientMismatchError(
            f"the logged config names provider {config.provider!r}, but the client sends to "
            f"{client.provider!r}; nothing was sent. Use a client made for the config "
            "(make_client(config)) or keep the provider the client was made for."
        )
    expected = wire_for(config)
    wire = client.wire
    if isinstance(wire, _BUILT_IN_WIRES):
        if wire != expected:
            raise ClientMismatchError(
                f"the client serializes with {wire!r}, but the logged config implies "
                f"{expected!r}; nothing was sent. Put model-visible wire options in the "
                "config (config.wire, see docs/providers.md) so the log can rebuild the bytes."
            )
    elif not checked:
        raise ClientMismatchError(
            f"the client serializes with a custom wire format ({type(wire).__name__}), which "
            "tapelog can trust only when the invariant checker compares its bytes with the "
            "rebuild; turn the checker on (check=True) or use the built-in wire formats."
        )
    return wire


def encode_request(request: LlmRequest, *, wire: WireFormat | None = None) -> bytes:
    """The exact HTTP body of ``request``: the serializer the live loop uses.

    ``wire`` defaults to the wire format of the request's own logged config.
    """
    return (wire or wire_for(request.config)).encode_body(request)


def wire_named(name: str, config: LlmCallConfig | None = None) -> WireFormat:
    """A wire chosen by name, e.g. to show what a log's requests look like on another wire.

    ``name`` is a provider name or a wire family (``openai``, ``anthropic``);
    the ``openai`` family keeps the config's own dialect when its provider is
    OpenAI-compatible.
    """
    if name == "anthropic":
        return AnthropicWire()
    if name == "openai" and config is not None:
        spec = PROVIDERS.get(config.provider)
        if spec is not None and spec.family != "anthropic":
            return wire_for(config)
    return wire_for(LlmCallConfig(provider=name, model=config.model if config else "-"))


def _default_http() -> httpx.AsyncClient:
    # Long reads: a reasoning model can think for minutes before the next event.
    return httpx.AsyncClient(timeout=httpx.Timeout(30.0, read=600.0))


def _in_process_emulator() -> httpx.AsyncClient:
    """A fresh in-process emulator behind an ASGI transport (no socket, no key)."""
    from tapelog.emulator import Emulator  # lazy: the emulator depends on llm, not vice versa

    return httpx.AsyncClient(transport=Emulator().transport(), timeout=httpx.Timeout(60.0))


def make_client(
    config: LlmCallConfig,
    *,
    base_url: str | None = None,
    http_client: httpx.AsyncClient | None = None,
    env: Mapping[str, str] | None = None,
    options: Mapping[str, Any] | None = None,
) -> ProviderClient:
    """A streaming client for ``config.provider``.

    ``base_url`` overrides the table's default (required for ``compatible``);
    ``http_client`` is injected for the emulator (ASGI transport) and tests
    (``httpx.MockTransport``), else one is created (for ``emulator`` without a
    base URL: a fresh in-process emulator); ``env`` replaces
    ``os.environ`` as the source of API keys. ``options`` go to the ``local``
    provider (model path, context size, threads).
    """
    spec = provider_spec(config.provider)
    if spec.family == "local":
        from tapelog.llm._local import LocalClient  # lazy: llama.cpp is optional

        client: ProviderClient = LocalClient(config=options)
        return client
    url = base_url or spec.base_url
    if url is None:
        raise ProviderError(
            f"The {spec.name} provider needs a base URL (for example "
            "http://localhost:8000/v1); pass --base-url or base_url=."
        )
    if http_client is not None:
        http = http_client
    elif spec.name == "emulator" and base_url is None:
        http = _in_process_emulator()
    else:
        http = _default_http()
    if spec.family == "anthropic":
        return AnthropicClient(
            http_client=http,
            base_url=url,
            provider=spec.name,
            api_key_env=spec.api_key_env,
            key_required=spec.key_required,
            env=env,
        )
    wire = wire_for(config)
    assert isinstance(wire, OpenAIWire)
    return OpenAIClient(
        http_client=http,
        base_url=url,
        provider=spec.name,
        wire=wire,
        api_key_env=spec.api_key_env,
        key_required=spec.key_required,
        env=env,
    )
