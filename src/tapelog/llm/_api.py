"""The wires, stream parsers, provider look-ups and usage helpers that the agent, the
checkers, the proxy and the CLI share (internal: docs/architecture.md).
"""

from tapelog.llm._anthropic_blocks import merges, role_shape
from tapelog.llm._anthropic_stream import AnthropicStreamParser
from tapelog.llm._anthropic_wire import AnthropicWire
from tapelog.llm._assemble import assemble_alternatives, assemble_message
from tapelog.llm._clients import ANTHROPIC_VERSION
from tapelog.llm._http import resolve_api_key, sized_content
from tapelog.llm._in_process import register_in_process_transport
from tapelog.llm._openai_stream import OpenAIStreamParser
from tapelog.llm._openai_wire import OpenAIWire, empty_content, no_text
from tapelog.llm._pieces import SEGMENT_BYTES, BodyCache, WireBody
from tapelog.llm._provider_registry import (
    complete_config,
    default_model,
    known_providers,
    provider_spec,
)
from tapelog.llm._registry import client_wire, wire_for, wire_named
from tapelog.llm._responses_stream import ResponsesStreamParser
from tapelog.llm._responses_wire import ResponsesWire
from tapelog.llm._secret_guard import SecretGuard
from tapelog.llm._sse import SseDecoder
from tapelog.llm._types import (
    AbortHandle,
    WireFormat,
    encode_wire_body,
    estimate_tokens,
    usage_prompt_tokens,
)
from tapelog.llm._wire_common import logged_target

__all__ = [
    "ANTHROPIC_VERSION",
    "SEGMENT_BYTES",
    "AbortHandle",
    "AnthropicStreamParser",
    "AnthropicWire",
    "BodyCache",
    "OpenAIStreamParser",
    "OpenAIWire",
    "ResponsesStreamParser",
    "ResponsesWire",
    "SecretGuard",
    "SseDecoder",
    "WireBody",
    "WireFormat",
    "assemble_alternatives",
    "assemble_message",
    "client_wire",
    "complete_config",
    "default_model",
    "empty_content",
    "encode_wire_body",
    "estimate_tokens",
    "known_providers",
    "logged_target",
    "merges",
    "no_text",
    "provider_spec",
    "register_in_process_transport",
    "resolve_api_key",
    "role_shape",
    "sized_content",
    "usage_prompt_tokens",
    "wire_for",
    "wire_named",
]
