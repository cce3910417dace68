"""Provider adapters: pure wire serializers, streaming clients and the provider table.

Three wire families (docs/providers.md): OpenAI-compatible chat completions
(dialects ``openai``, ``deepseek``, ``compatible``), the OpenAI Responses API
(``config.wire.api = "responses"``) and Anthropic Messages.
Serializing is a pure function of the request (:func:`encode_request`); the
streaming clients (:func:`make_client`) send exactly those bytes and yield
neutral chunks, which the loop joins into the logged assistant message.
Providers beyond the built-in table (:data:`PROVIDERS`) are the shipped
:data:`PRESETS` and any :func:`register_provider` or providers file
(:func:`load_providers`) adds; their wire is recorded in the logged config, so
their logs rebuild without them. The wires, parsers and look-ups the other
packages share are in :mod:`tapelog.llm._api`. docs/providers.md documents
every mapping and the facts behind it.
"""

from tapelog.llm._presets import PRESETS
from tapelog.llm._provider_file import load_providers
from tapelog.llm._provider_registry import (
    PROVIDERS,
    register_provider,
    unregister_provider,
    wire_profile,
)
from tapelog.llm._provider_spec import ProviderSpec
from tapelog.llm._registry import encode_request, make_client
from tapelog.llm._types import ProviderClient
from tapelog.request import LlmRequest

__all__ = [
    "PRESETS",
    "PROVIDERS",
    "LlmRequest",
    "ProviderClient",
    "ProviderSpec",
    "encode_request",
    "load_providers",
    "make_client",
    "register_provider",
    "unregister_provider",
    "wire_profile",
]
