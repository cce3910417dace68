"""Body-option checks: the 400s real providers give for structured-output options.

``response_format`` and ``tool_choice`` shape what the model may answer, and
a wrong one fails only against the real API. These checks refuse the same
requests with the provider's own message (each names where it was seen;
docs/emulator.md, "Validation", lists them). What a wire refuses is its
profile's (``tapelog.cache.WIRE_PROFILES``), the facts the agent loop chooses
by, so the two cannot disagree; and :func:`forced_tool` reads
which tool a request forces, so a scripted ``output`` entry can answer the
way the request asks (docs/emulator.md, "Script format").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tapelog.cache import WireProfile
from tapelog.cache._api import blocks_of

__all__ = ["check_forced_tool", "check_response_format", "check_tool_history", "forced_tool"]

# OpenAI: a json_schema response format without its json_schema object
# (openai/openai-python#1632, architects-toolkit/SmartHopper#259).
_OPENAI_NO_SCHEMA = "Missing required parameter: 'response_format.json_schema'."
# DeepSeek has JSON Output only (api-docs.deepseek.com, guides/json_mode): a
# json_schema format is refused (llm-exe/llm-exe#662, UKGovernmentBEIS/inspect_ai#4916;
# the message is the deepseek profile's), and json_object needs the word "json"
# in the prompt (browserbase/stagehand#1204).
_DEEPSEEK_NO_JSON_WORD = (
    "Prompt must contain the word 'json' in some form to use 'response_format' of type"
    " 'json_object'"
)
# Anthropic: a history with tool blocks but no tool definitions
# (anthropics/anthropic-sdk-python#494).
_ANTHROPIC_NO_TOOLS = "Requests which include `tool_use` or `tool_result` blocks must define tools."
# Anthropic: extended thinking with a tool_choice that forces a tool (any / tool)
# (mastra-ai/mastra#7507, can1357/oh-my-pi#341).
_ANTHROPIC_THINKING_FORCED = "Thinking may not be enabled when tool_choice forces tool use."


def _prompt_text(messages: Any) -> str:
    """The text of the system and user messages (what the "json" rule reads)."""
    parts: list[str] = []
    for message in messages if isinstance(messages, list) else ():
        if not isinstance(message, Mapping) or message.get("role") not in ("system", "user"):
            continue
        parts.extend(
            b["text"]
            for b in blocks_of(message.get("content"))
            if isinstance(b, Mapping) and isinstance(b.get("text"), str)
        )
    return "\n".join(parts)


def check_response_format(body: Mapping[str, Any], profile: WireProfile) -> str | None:
    """The OpenAI-compatible ``response_format`` the route's wire accepts."""
    fmt = body.get("response_format")
    if not isinstance(fmt, Mapping) or not profile.response_format:
        return None
    kind = fmt.get("type")
    refused = profile.refused_formats.get(kind) if isinstance(kind, str) else None
    if refused is not None:
        return refused
    if kind == "json_object" and profile.json_word_required:
        if "json" not in _prompt_text(body["messages"]).lower():
            return _DEEPSEEK_NO_JSON_WORD
        return None
    if kind == "json_schema" and not isinstance(fmt.get("json_schema"), Mapping):
        return _OPENAI_NO_SCHEMA
    return None


def check_tool_history(body: Mapping[str, Any], profile: WireProfile) -> str | None:
    """A history holding ``tool_use`` or ``tool_result`` blocks needs ``tools``
    (on a wire whose profile says so: Anthropic's)."""
    if not profile.tool_history_needs_tools or body.get("tools"):
        return None
    for message in body["messages"]:
        if message.get("tool_calls") or message.get("role") == "tool":  # the OpenAI shapes
            return _ANTHROPIC_NO_TOOLS
        for block in blocks_of(message.get("content")):
            if isinstance(block, Mapping) and block.get("type") in ("tool_use", "tool_result"):
                return _ANTHROPIC_NO_TOOLS
    return None


def check_forced_tool(body: Mapping[str, Any], profile: WireProfile) -> str | None:
    """With thinking on, a ``tool_choice`` that forces a tool is refused (on a
    wire whose profile says so; the emulator has the message of Anthropic's)."""
    if not profile.thinking_refuses_forced_tool or profile.family != "anthropic":
        return None
    choice = body.get("tool_choice")
    kind = choice.get("type") if isinstance(choice, Mapping) else None
    if kind in ("any", "tool") and profile.thinking(body.get("thinking")):
        return _ANTHROPIC_THINKING_FORCED
    return None


def forced_tool(body: Mapping[str, Any]) -> str | None:
    """The tool a request forces the model to call, if any.

    Anthropic ``{"type": "tool", "name"}``, OpenAI chat ``{"type": "function",
    "function": {"name"}}``, Responses ``{"type": "function", "name"}``;
    ``any`` / ``required`` force the only tool when there is exactly one.
    """
    choice = body.get("tool_choice")
    if isinstance(choice, Mapping):
        if choice.get("type") in ("tool", "function") and isinstance(choice.get("name"), str):
            return str(choice["name"])
        function = choice.get("function")
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            return str(function["name"])
        choice = choice.get("type")
    tools = body.get("tools")
    if choice in ("any", "required") and isinstance(tools, list) and len(tools) == 1:
        tool = tools[0] if isinstance(tools[0], Mapping) else {}
        name = tool.get("name", (tool.get("function") or {}).get("name"))
        return name if isinstance(name, str) else None
    return None
