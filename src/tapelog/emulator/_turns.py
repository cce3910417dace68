"""Conversation-shape checks: the 400s real providers give for badly paired turns.

A wire bug that drops a tool result, misorders blocks or forgets a field the
provider requires only shows up against the real API, as an HTTP 400. These
checks make the emulator refuse the same requests with the same message, so
the test suite catches such bugs. Each rule names where its message was seen;
docs/emulator.md ("Validation") lists them. A rule is added only with a source.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["check_anthropic_turns", "check_deepseek_reasoning", "check_openai_turns"]

# OpenAI wording, seen in the error bodies quoted in sdcb/chats#132 and
# smarter-sh/smarter#264 (type invalid_request_error, param messages.[N].role)
# and in dapr/dapr-agents#145 for an unknown id. "preceeding" is OpenAI's spelling.
_OPENAI_UNANSWERED = (
    "An assistant message with 'tool_calls' must be followed by tool messages responding"
    " to each 'tool_call_id'. The following tool_call_ids did not have response messages: {ids}"
)
_OPENAI_ORPHAN = (
    "Invalid parameter: messages with role 'tool' must be a response to a preceeding"
    " message with 'tool_calls'."
)
_OPENAI_UNKNOWN_ID = (
    "Invalid parameter: 'tool_call_id' of '{id}' not found in 'tool_calls' of previous message."
)
# DeepSeek wording: langgenius/dify#32222 (official DeepSeek API) for a missing
# answer; FoundationAgents/OpenManus#23 (deepseek-chat) and qwersyk/Newelle#425
# (V4 Flash) for a tool message that answers no call. DeepSeek has no separate
# message for an unknown id that we could source, so it gets the orphan message.
_DEEPSEEK_UNANSWERED = (
    "An assistant message with 'tool_calls' must be followed by tool messages responding"
    " to each 'tool_call_id'. (insufficient tool messages following tool_calls message)"
)
_DEEPSEEK_ORPHAN = (
    "Messages with role 'tool' must be a response to a preceding message with 'tool_calls'"
)
# DeepSeek thinking mode (api-docs.deepseek.com, guides/thinking_mode, "Tool calls");
# the message as quoted in CherryHQ/cherry-studio#11751 and hotovo/aider-desk#529.
# The index counts every message from 0, the system message included.
_DEEPSEEK_REASONING = (
    "Missing `reasoning_content` field in the assistant message at message index {index}."
    " For more information, please refer to"
    " https://api-docs.deepseek.com/guides/thinking_mode#tool-calls"
)
_REASONER_MODELS = frozenset({"deepseek-reasoner"})
# Anthropic wording: anthropics/claude-code#5989 (missing result), QwenLM/qwen-code#8165
# (a text block before the tool_result gets that same message: the results must open
# the next message), anthropics/claude-code#13460 (a result with no matching tool_use),
# anthropics/claude-code#23440 and mckaywrigley/chatbot-ui#1656 (blank text blocks).
_ANTHROPIC_UNANSWERED = (
    "messages.{index}: `tool_use` ids were found without `tool_result` blocks immediately"
    " after: {ids}. Each `tool_use` block must have a corresponding `tool_result` block"
    " in the next message."
)
_ANTHROPIC_UNEXPECTED = (
    "messages.{index}.content.{block}: unexpected `tool_use_id` found in `tool_result`"
    " blocks: {id}. Each `tool_result` block must have a corresponding `tool_use` block"
    " in the previous message."
)
# Not checked: "first message must use the user role" (lobehub/lobehub#1601, 2024);
# the first-party API accepts an assistant message first since late 2024, only
# Bedrock refuses it (anthropics/anthropic-sdk-typescript#622).
_ANTHROPIC_EMPTY_TEXT = "messages: text content blocks must be non-empty"
_ANTHROPIC_BLANK_TEXT = "messages: text content blocks must contain non-whitespace text"


def _call_ids(message: Mapping[str, Any]) -> list[str]:
    calls = message.get("tool_calls")
    if not isinstance(calls, list):
        return []
    return [str(c.get("id")) for c in calls if isinstance(c, Mapping)]


def check_openai_turns(messages: Sequence[Mapping[str, Any]], *, deepseek: bool) -> str | None:
    """Tool messages must directly answer every call of the assistant message before them."""
    unanswered = _DEEPSEEK_UNANSWERED if deepseek else _OPENAI_UNANSWERED
    orphan = _DEEPSEEK_ORPHAN if deepseek else _OPENAI_ORPHAN
    calls: list[str] | None = None  # the calls the current run of tool messages may answer
    pending: list[str] = []
    for message in messages:
        if message["role"] == "tool":
            if calls is None:
                return orphan
            answered = str(message.get("tool_call_id"))
            if answered not in calls:
                return orphan if deepseek else _OPENAI_UNKNOWN_ID.format(id=answered)
            if answered in pending:
                pending.remove(answered)
            continue
        if pending:
            return unanswered.format(ids=", ".join(pending))
        ids = _call_ids(message) if message["role"] == "assistant" else []
        calls = ids or None
        pending = list(ids)
    if pending:
        return unanswered.format(ids=", ".join(pending))
    return None


def _thinking(body: Mapping[str, Any]) -> bool:
    """Thinking as the request asks for it: the flag, or a reasoner model unless disabled."""
    thinking = body.get("thinking")
    kind = thinking.get("type") if isinstance(thinking, Mapping) else None
    if kind == "enabled":
        return True
    return kind != "disabled" and body.get("model") in _REASONER_MODELS


def check_deepseek_reasoning(body: Mapping[str, Any]) -> str | None:
    """In thinking mode every assistant message with tool calls must carry ``reasoning_content``."""
    if not _thinking(body):
        return None
    for index, message in enumerate(body["messages"]):
        has_calls = message["role"] == "assistant" and bool(_call_ids(message))
        if has_calls and not isinstance(message.get("reasoning_content"), str):
            return _DEEPSEEK_REASONING.format(index=index)
    return None


def _blocks(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, Mapping)]


def _text_problem(blocks: Sequence[Mapping[str, Any]]) -> str | None:
    for block in blocks:
        if block.get("type") != "text" or not isinstance(block.get("text"), str):
            continue
        if block["text"] == "":
            return _ANTHROPIC_EMPTY_TEXT
        if not block["text"].strip():
            return _ANTHROPIC_BLANK_TEXT
    return None


def check_anthropic_turns(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """Tool results open the next user message and answer only the previous tool uses."""
    uses: list[str] = []  # tool_use ids of the previous message
    for index, message in enumerate(messages):
        blocks = _blocks(message)
        problem = _text_problem(blocks)
        if problem is not None:
            return problem
        leading: set[str] = set()
        for block in blocks:
            if block.get("type") != "tool_result":
                break
            leading.add(str(block.get("tool_use_id")))
        missing = [u for u in uses if u not in leading]
        if missing:
            return _ANTHROPIC_UNANSWERED.format(index=index - 1, ids=", ".join(missing))
        for number, block in enumerate(blocks):
            used = str(block.get("tool_use_id"))
            if block.get("type") == "tool_result" and used not in uses:
                return _ANTHROPIC_UNEXPECTED.format(index=index, block=number, id=used)
        is_assistant = message["role"] == "assistant"
        uses = [str(b.get("id")) for b in blocks if is_assistant and b.get("type") == "tool_use"]
    return None
