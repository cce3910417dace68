"""Provider adapters: pure wire serializers, streaming clients and the provider table.

Two wire families (docs/providers.md): OpenAI-compatible chat completions
(:class:`OpenAIWire`, dialects ``openai``, ``deepseek``, ``compatible``) and
Anthropic Messages (:class:`AnthropicWire`). Serializing is a pure function of
the request; the streaming clients send exactly those bytes and yield neutral
chunks, which :func:`assemble_message` joins into the logged assistant message.
Providers beyond the built-in table (:data:`PROVIDERS`) are the shipped
:data:`PRESETS` and any :func:`register_provider` or providers file
(:func:`load_providers`) adds; their wire is recorded in the logged config
(:func:`complete_config`), so their logs rebuild without them. A provider
that answers inside this process (the emulator) is reached through the
transport registered for it (:func:`register_in_process_transport`).
docs/providers.md documents every mapping and the facts behind it.
"""

from tapelog.llm._anthropic_stream import AnthropicStreamParser, anthropic_usage
from tapelog.llm._anthropic_wire import ANTHROPIC_DEFAULT_MAX_TOKENS, AnthropicWire
from tapelog.llm._assemble import AssembledMessage, assemble_message
from tapelog.llm._clients import ANTHROPIC_VERSION, AnthropicClient, OpenAIClient
from tapelog.llm._http import resolve_api_key
from tapelog.llm._in_process import (
    TransportFactory,
    in_process_transport,
    register_in_process_transport,
    unregister_in_process_transport,
)
from tapelog.llm._openai_stream import OpenAIStreamParser, openai_usage
from tapelog.llm._openai_wire import (
    DEFAULT_REASONING_SEND_BACK,
    MODEL_REASONING_SEND_BACK,
    OpenAIDialect,
    OpenAIWire,
    ReasoningSendBack,
)
from tapelog.llm._pieces import BodyCache
from tapelog.llm._presets import PRESETS
from tapelog.llm._provider_file import load_providers
from tapelog.llm._provider_registry import (
    DEFAULT_MODELS,
    PROVIDERS,
    complete_config,
    default_model,
    known_providers,
    provider_spec,
    register_provider,
    unregister_provider,
    wire_identity,
    wire_profile,
)
from tapelog.llm._provider_spec import ProviderSpec
from tapelog.llm._registry import (
    WIRE_OPTIONS,
    client_wire,
    encode_request,
    make_client,
    wire_for,
    wire_named,
)
from tapelog.llm._secret_guard import SecretGuard
from tapelog.llm._types import (
    AbortHandle,
    ProviderClient,
    WireFormat,
    estimate_tokens,
    normalise_usage,
    usage_count,
    usage_prompt_tokens,
)
from tapelog.request import LlmRequest

__all__ = [
    "ANTHROPIC_DEFAULT_MAX_TOKENS",
    "ANTHROPIC_VERSION",
    "DEFAULT_MODELS",
    "DEFAULT_REASONING_SEND_BACK",
    "MODEL_REASONING_SEND_BACK",
    "PRESETS",
    "PROVIDERS",
    "WIRE_OPTIONS",
    "AbortHandle",
    "AnthropicClient",
    "AnthropicStreamParser",
    "AnthropicWire",
    "AssembledMessage",
    "BodyCache",
    "LlmRequest",
    "OpenAIClient",
    "OpenAIDialect",
    "OpenAIStreamParser",
    "OpenAIWire",
    "ProviderClient",
    "ProviderSpec",
    "ReasoningSendBack",
    "SecretGuard",
    "TransportFactory",
    "WireFormat",
    "anthropic_usage",
    "assemble_message",
    "client_wire",
    "complete_config",
    "default_model",
    "encode_request",
    "estimate_tokens",
    "in_process_transport",
    "known_providers",
    "load_providers",
    "make_client",
    "normalise_usage",
    "openai_usage",
    "provider_spec",
    "register_in_process_transport",
    "register_provider",
    "resolve_api_key",
    "unregister_in_process_transport",
    "unregister_provider",
    "usage_count",
    "usage_prompt_tokens",
    "wire_for",
    "wire_identity",
    "wire_named",
    "wire_profile",
]
