"""Wires and clients from logged configs: ``wire_for``, ``client_wire``, ``make_client``.

``wire_for(config)`` is pure and needs nothing but the logged config: it is
what the audit path uses to rebuild request bytes from the log alone (the
provider table and the registry are in ``_provider_registry``; a provider
outside the built-in table has its wire identity in ``config.wire``).
``make_client`` adds what must never be logged (the API key, read from the
environment at send time) and what is local to a machine (base URL, HTTP client).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, get_args

import httpx

from tapelog._errors import ClientMismatchError, HeaderError, ProviderError
from tapelog.llm._anthropic_wire import AnthropicWire
from tapelog.llm._clients import AnthropicClient, OpenAIClient, ResponsesClient
from tapelog.llm._in_process import in_process_transport
from tapelog.llm._openai_wire import OpenAIWire, ReasoningSendBack, TokenField
from tapelog.llm._provider_registry import (
    complete_config,
    provider_spec,
    wire_identity,
    wire_options,
)
from tapelog.llm._responses_wire import ResponsesWire
from tapelog.llm._types import ProviderClient, WireFormat
from tapelog.log._api import LlmCallConfig
from tapelog.request import LlmRequest

__all__ = [
    "WIRE_OPTIONS",
    "client_wire",
    "encode_request",
    "make_client",
    "wire_for",
    "wire_named",
]


WIRE_OPTIONS: Final[Mapping[str, tuple[str, ...]]] = {
    "openai": (
        "reasoning_send_back",
        "api",
        "store_false",
        "input_string",
        "held",
        "token_field",
        "stop_string",
        "query",
    ),
    "anthropic": ("cache_markers", "query"),
    "local": ("reasoning_send_back", "token_field", "stop_string"),
}
"""The ``config.wire`` options each wire family reads (docs/providers.md)."""

OPENAI_APIS: Final = ("chat", "responses")
"""The values of ``config.wire.api`` (openai family): the endpoint and body the
requests use. Absent means ``chat``, so every log written before the option
existed rebuilds exactly as it did."""


def _api(config: LlmCallConfig) -> str:
    """The OpenAI-family API a logged config chooses (``chat`` unless it says otherwise)."""
    api = config.wire.get("api", "chat")
    if api not in OPENAI_APIS:
        raise HeaderError(f"config.wire.api must be one of {', '.join(OPENAI_APIS)}, got {api!r}.")
    return str(api)


def _send_back(config: LlmCallConfig, family: str) -> ReasoningSendBack | None:
    options = wire_options(config)
    allowed = WIRE_OPTIONS[family]
    unknown = [k for k in options if k not in allowed]
    if unknown:
        known = ", ".join(allowed) or "none"
        raise HeaderError(
            f"config.wire has the option {unknown[0]!r}, which the {config.provider} wire does "
            f"not read (its options: {known})."
        )
    if options.get("cache_markers", "client") != "client":
        raise HeaderError(
            'config.wire.cache_markers must be "client" (the client\'s markers, kept in the '
            "blocks) or absent (the wire places its own breakpoints)."
        )
    if not isinstance(options.get("query", ""), str):
        raise HeaderError("config.wire.query must be a string (a URL query, without the '?')")
    value = options.get("reasoning_send_back")
    if value is not None and value not in get_args(ReasoningSendBack):
        raise HeaderError(
            f"config.wire.reasoning_send_back must be one of "
            f"{', '.join(get_args(ReasoningSendBack))}, got {value!r}."
        )
    return value


def wire_for(config: LlmCallConfig) -> OpenAIWire | AnthropicWire | ResponsesWire:
    """The serializer for a logged config (pure: no environment, no network, no registry).

    The config alone decides it: the wire family and dialect (a built-in
    provider's from its name, any other's from ``config.wire``), and the wire
    options in ``config.wire``. The ``local`` provider serializes with the
    compatible OpenAI dialect too (its client parses that body for llama.cpp).
    """
    family, dialect = wire_identity(config)
    send_back = _send_back(config, family)
    if family == "anthropic":
        return AnthropicWire()
    assert dialect is not None
    store_false = config.wire.get("store_false", True)
    if _api(config) == "responses":
        if send_back is not None:
            raise HeaderError(
                "config.wire.reasoning_send_back is for chat completions; the responses "
                "wire sends reasoning back as the items the model returned. Leave it out."
            )
        if not isinstance(store_false, bool):
            raise HeaderError(
                f"config.wire.store_false must be true or false, got {store_false!r}."
            )
        for option in ("token_field", "stop_string"):
            if option in config.wire:
                raise HeaderError(
                    f"config.wire.{option} is for chat completions; leave it out of a "
                    'responses wire (api "responses").'
                )
        input_string = config.wire.get("input_string", False)
        if not isinstance(input_string, bool):
            raise HeaderError(
                f"config.wire.input_string must be true or false, got {input_string!r}."
            )
        held = config.wire.get("held", 0)
        if not isinstance(held, int) or isinstance(held, bool) or held < 0:
            raise HeaderError(f"config.wire.held must be an int >= 0, got {held!r}.")
        return ResponsesWire(
            dialect=dialect, store_false=store_false, input_string=input_string, held=held
        )
    for option in ("store_false", "input_string", "held"):
        if option in config.wire:
            raise HeaderError(f'config.wire.{option} is for the responses wire (api "responses").')
    stop_string = config.wire.get("stop_string", False)
    if not isinstance(stop_string, bool):
        raise HeaderError(f"config.wire.stop_string must be true or false, got {stop_string!r}.")
    return OpenAIWire(
        dialect=dialect,
        send_back=send_back,
        token_field=_token_field(config),
        stop_string=stop_string,
    )


def _token_field(config: LlmCallConfig) -> TokenField | None:
    value = wire_options(config).get("token_field")
    if value is not None and value not in get_args(TokenField):
        raise HeaderError(
            f"config.wire.token_field must be one of {', '.join(get_args(TokenField))}, "
            f"got {value!r}."
        )
    return value


_BUILT_IN_WIRES: Final = (OpenAIWire, AnthropicWire, ResponsesWire)


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

    ``name`` is a provider name (built in or registered) or a wire family
    (``openai``: chat completions, ``anthropic``, ``responses``); ``openai``
    and ``responses`` keep the config's own dialect (and ``openai`` its other
    wire options) when its provider is OpenAI-compatible.
    """
    if name == "anthropic":
        return AnthropicWire()
    if name in ("openai", "responses") and config is not None:
        try:
            family, dialect = wire_identity(config)
        except HeaderError:
            family, dialect = "anthropic", None  # no known wire: the plain openai dialect
        if family == "openai" and dialect is not None:
            if name == "responses":
                return ResponsesWire(dialect=dialect)
            chat = {k: v for k, v in config.wire.items() if k != "api"}
            return wire_for(config.replace(wire=chat))
        if family == "local" and name == "openai":
            return wire_for(config)
    if name == "responses":
        return ResponsesWire()
    named = LlmCallConfig(provider=name, model=config.model if config else "-")
    return wire_for(complete_config(named))


def _default_http() -> httpx.AsyncClient:
    # Long reads: a reasoning model can think for minutes before the next event.
    return httpx.AsyncClient(timeout=httpx.Timeout(30.0, read=600.0))


def make_client(
    config: LlmCallConfig,
    *,
    base_url: str | None = None,
    http_client: httpx.AsyncClient | None = None,
    env: Mapping[str, str] | None = None,
    options: Mapping[str, Any] | None = None,
) -> ProviderClient:
    """A streaming client for ``config.provider``.

    ``config.provider`` is built in, a preset or registered (its wire is the
    completed config's, :func:`complete_config`). ``base_url`` overrides the
    table's default (required for ``compatible``); ``http_client`` is
    injected for the emulator (ASGI transport) and tests
    (``httpx.MockTransport``), else one is created: without a base URL, through
    the provider's in-process transport when one is registered
    (:func:`register_in_process_transport`; ``emulator``: a fresh in-process
    emulator), else over the network; ``env`` replaces
    ``os.environ`` as the source of API keys. ``options`` go to the ``local``
    provider (model path, context size, threads).
    """
    spec = provider_spec(config.provider)
    config = complete_config(config)
    family, _ = wire_identity(config)
    if family == "local":
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
    elif base_url is None and (transport := in_process_transport(spec.name)) is not None:
        http = httpx.AsyncClient(transport=transport, timeout=httpx.Timeout(60.0))
    else:
        http = _default_http()
    if family == "anthropic":
        return AnthropicClient(
            http_client=http,
            base_url=url,
            provider=spec.name,
            api_key_env=spec.api_key_env,
            key_required=spec.key_required,
            env=env,
        )
    wire = wire_for(config)
    if isinstance(wire, ResponsesWire):
        return ResponsesClient(
            http_client=http,
            base_url=url,
            provider=spec.name,
            wire=wire,
            api_key_env=spec.api_key_env,
            key_required=spec.key_required,
            env=env,
        )
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
