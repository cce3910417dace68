"""One neutral message -> Anthropic Messages blocks (pure), and the wire role.

A neutral block maps to the API's block (text, thinking with its signature,
redacted thinking with its data, tool use, tool result, image); a block's
``extra`` (the client's fields the neutral block does not model, e.g.
``cache_control``) follows the wire's own fields, and a ``wire`` block (a
type the log does not model) is sent as given. A message with fields of its
own (``content_string``, ``fields``) gets a :class:`WireRole`, which keeps it a
wire message of its own. docs/providers.md, "Anthropic Messages body".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tapelog._errors import EventError, HeaderError, JsonValueError
from tapelog.llm._wire_common import refuse_block
from tapelog.log import decode, encode
from tapelog.log._api import FrozenDict, freeze_faithful

__all__ = ["Block", "WireRole", "map_message", "merges", "role_shape", "tool_body"]

Block = tuple[FrozenDict, bytes]
"""A wire block and its canonical bytes (without cache_control)."""


class WireRole(str):
    """The role of a wire message that is one client message with fields of
    its own: its content sent as a string (``content_string``) and the
    message's other fields (``fields``, sent after ``content``; logged even when
    empty for a message that follows one of its role). Such a message never
    merges with a neighbour of the same role: the client sent it alone."""

    string: bool
    extra: Mapping[str, Any]


def _role(role: str, message: Mapping[str, Any]) -> str:
    string, extra = bool(message.get("content_string")), message.get("fields")
    if not string and extra is None:
        return role
    out = WireRole(role)
    out.string, out.extra = string, extra or {}
    return out


def merges(previous: str, role: str) -> bool:
    """Whether a wire message of ``role`` joins the one before it (of ``previous``)."""
    return (
        previous == role and not isinstance(previous, WireRole) and not isinstance(role, WireRole)
    )


def role_shape(role: str) -> tuple[str, bool, Any]:
    """A wire role with its message-level fields, for comparing two messages."""
    if isinstance(role, WireRole):
        return str(role), role.string, role.extra
    return role, False, None


def tool_body(tool: Mapping[str, Any]) -> dict[str, Any]:
    """A logged tool schema as the API's tool object."""
    if "openai_tool" in tool:
        raise HeaderError(
            f"tool {tool['name']!r} is a chat completions tool kept as given (openai_tool); "
            "the anthropic wire cannot send it, an OpenAI wire can"
        )
    # Schema key order is the user's: a provider caches rendered tokens.
    if "parameters" not in tool and tool.get("type") not in (None, "custom"):
        return dict(tool)  # a server tool (web_search_*, code_execution_*...): as given
    out: dict[str, Any] = {"name": tool["name"]}
    if "description" in tool:
        out["description"] = tool["description"]
    out["input_schema"] = tool.get("parameters", {"type": "object", "properties": {}})
    for key, value in tool.items():
        if key not in ("name", "description", "parameters"):
            out[key] = value
    return out


def map_message(message: Mapping[str, Any], where: str) -> tuple[str, tuple[Block, ...]]:
    role = message["role"]
    if role not in ("user", "assistant", "tool", "system"):
        raise EventError(
            f"{where}: the anthropic wire has no {role!r} message (the Messages API sends "
            "instructions as the system prompt); an OpenAI wire can send it"
        )
    wire_role = "user" if role == "tool" else role
    blocks: list[Block] = []
    for i, block in enumerate(message["content"]):
        at = f"{where}.content[{i}]"
        mapped = _map_block("user" if role == "system" else role, block, at)
        if mapped is not None:
            frozen = freeze_faithful(mapped, path=at)
            blocks.append((frozen, encode(frozen)))
    return _role(wire_role, message), tuple(blocks)


def _map_block(role: str, block: Mapping[str, Any], where: str) -> dict[str, Any] | None:
    mapped = _map_known(role, block, where)
    if mapped is None:
        return None
    extra = block.get("extra")
    if extra:
        mapped.update(extra)
    for key in block.get("omit", ()):
        mapped.pop(key, None)  # a field the client left out (a result without content)
    return mapped


def _map_known(role: str, block: Mapping[str, Any], where: str) -> dict[str, Any] | None:
    btype = block["type"]
    if btype == "wire" and block["wire"] == "anthropic":
        return dict(block["block"])
    if btype == "text" and not block["text"].strip():
        # The API answers 400 "messages: text content blocks must be non-empty"
        # or "... must contain non-whitespace text"; such a block says nothing.
        return None
    if role == "assistant" and btype == "text":
        return {"type": "text", "text": block["text"]}
    if role == "assistant" and btype == "reasoning":
        if "data" in block:
            return {"type": "redacted_thinking", "data": block["data"]}
        if "signature" in block:
            return {"type": "thinking", "thinking": block["text"], "signature": block["signature"]}
        # Reasoning without a signature came from another provider; Anthropic
        # would reject it, and it was never part of an Anthropic prompt.
        return None
    if role == "assistant" and btype == "tool_call":
        return {
            "type": "tool_use",
            "id": block["id"],
            "name": block["name"],
            "input": _tool_input(block["arguments"], where),
        }
    if role == "user" and btype == "text":
        return {"type": "text", "text": block["text"]}
    if role in ("user", "tool") and btype == "image":
        return _image(block)
    if role in ("user", "tool") and btype == "tool_result":
        content = block["content"]
        out: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": block["tool_call_id"],
            "content": content
            if isinstance(content, str)
            else [_tool_result_part(p, f"{where}.content[{k}]") for k, p in enumerate(content)],
        }
        if block["is_error"]:
            out["is_error"] = True
        return out
    raise refuse_block("anthropic", role, block, where)


def _tool_result_part(part: Mapping[str, Any], where: str) -> dict[str, Any]:
    out: dict[str, Any]
    if part.get("type") == "text":
        out = {"type": "text", "text": part["text"]}
    elif part.get("type") == "image":
        out = _image(part)
    elif part.get("type") == "wire" and part.get("wire") == "anthropic":
        out = dict(part["block"])
    else:
        raise refuse_block("anthropic", "tool", part, where)
    out.update(part.get("extra") or {})
    return out


def _image(block: Mapping[str, Any]) -> dict[str, Any]:
    if "url" in block and "data" not in block:
        return {"type": "image", "source": {"type": "url", "url": block["url"]}}
    source = {"type": "base64", "media_type": block["media_type"], "data": block["data"]}
    return {"type": "image", "source": source}


def _tool_input(arguments: str, where: str) -> Any:
    # Parsed once, key order preserved: the bytes re-encode as the model wrote them
    # modulo insignificant whitespace.
    try:
        value = decode(arguments, path=f"{where}.arguments")
    except JsonValueError as exc:
        raise EventError(
            f"{where}.arguments is not valid JSON ({exc.problem}); the anthropic wire sends "
            "tool inputs as JSON objects, so this call cannot be replayed to Anthropic."
        ) from None
    if not isinstance(value, dict):
        raise EventError(
            f"{where}.arguments is JSON but not an object; the anthropic wire sends tool "
            "inputs as JSON objects, so this call cannot be replayed to Anthropic."
        )
    return value
