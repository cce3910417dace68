"""The attribute names and values of the OpenTelemetry GenAI semantic conventions we emit.

The names are those of ``opentelemetry-semantic-conventions`` 0.66b2 (the
release ``opentelemetry-sdk`` 1.45 pins), module
``opentelemetry.semconv._incubating.attributes.gen_ai_attributes``, under the
same constant names. They are written out here rather than imported because
that module is private (``_incubating``) and already marks every GenAI name as
"moved to the GenAI conventions repository": a later release may drop it,
while the names are a wire contract the tracing tools read. ``tests/export``
checks each ``GEN_AI_*`` here against the installed package, so a drift fails
there, not in someone's dashboard. tapelog's own ``tapelog.*`` attributes are
listed in docs/otel.md.
"""

from __future__ import annotations

from typing import Final

GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME: Final = "gen_ai.provider.name"
GEN_AI_SYSTEM: Final = "gen_ai.system"
"""Replaced by ``gen_ai.provider.name`` in the conventions; still sent, with the
same value, for consumers that predate it."""
GEN_AI_CONVERSATION_ID: Final = "gen_ai.conversation.id"
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
GEN_AI_REQUEST_MAX_TOKENS: Final = "gen_ai.request.max_tokens"
GEN_AI_REQUEST_TEMPERATURE: Final = "gen_ai.request.temperature"
GEN_AI_REQUEST_TOP_P: Final = "gen_ai.request.top_p"
GEN_AI_REQUEST_SEED: Final = "gen_ai.request.seed"
GEN_AI_REQUEST_STOP_SEQUENCES: Final = "gen_ai.request.stop_sequences"
GEN_AI_RESPONSE_MODEL: Final = "gen_ai.response.model"
GEN_AI_RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: Final = "gen_ai.usage.cache_read.input_tokens"
GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: Final = "gen_ai.usage.cache_creation.input_tokens"
GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: Final = "gen_ai.usage.reasoning.output_tokens"
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
GEN_AI_TOOL_TYPE: Final = "gen_ai.tool.type"
# Opt-in content (``--content``): JSON text in the conventions' message shapes.
GEN_AI_INPUT_MESSAGES: Final = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
GEN_AI_SYSTEM_INSTRUCTIONS: Final = "gen_ai.system_instructions"
GEN_AI_TOOL_DEFINITIONS: Final = "gen_ai.tool.definitions"
GEN_AI_TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"

OP_CHAT: Final = "chat"
OP_INVOKE_AGENT: Final = "invoke_agent"
OP_EXECUTE_TOOL: Final = "execute_tool"
"""``gen_ai.operation.name`` values (the conventions' ``GenAiOperationNameValues``)."""

ERROR_TYPE: Final = "error.type"
"""The general conventions' class of error an operation ended with."""
HTTP_RESPONSE_STATUS_CODE: Final = "http.response.status_code"

FINISH_REASONS: Final = {
    "stop": "stop",
    "tool_calls": "tool_call",
    "max_tokens": "length",
    "error": "error",
}
"""tapelog's normalised finish reasons (docs/format.md, "Chunks") to the
conventions' values (``stop``, ``tool_call``, ``length``, ``error``). A reason
not listed is passed through."""
