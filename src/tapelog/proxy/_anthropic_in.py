"""An Anthropic Messages request body -> the log's terms, and its normal form.

``system`` is the system prompt (a string, or one text block). A message
becomes neutral messages block by block:

* ``user``: each run of ``tool_result`` blocks is one neutral ``tool`` message
  per result (``is_error`` kept; text and image content), each run of text /
  image blocks one ``user`` message;
* ``assistant``: ``text``; ``thinking`` (with its signature) and
  ``redacted_thinking`` as reasoning blocks the wire sends back verbatim;
  ``tool_use`` as a tool call whose ``arguments`` are the JSON text of its
  ``input`` (key order kept).

``model``, ``max_tokens``, ``temperature``, ``top_p`` and ``stop_sequences`` are
config fields; ``stream`` is the proxy's own and ``cache_control`` markers are
not carried: the Anthropic wire places its own four breakpoints
(docs/providers.md), which changes what is cached and billed, never what the
model reads. Every other top-level field goes to ``config.extras`` as given.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from tapelog._errors import EventError, JsonValueError, ProxyError
from tapelog.llm._api import AnthropicWire
from tapelog.log._api import FrozenDict, encode_trusted, freeze
from tapelog.proxy._keys import loose_key
from tapelog.proxy._normal import Opaque, first_difference, normal, one_text, text_parts
from tapelog.proxy._types import (
    EVERY_RULE,
    NOT_A_MESSAGE,
    ClientRequest,
    Translated,
    is_message,
)

__all__ = ["anthropic_top", "parse_anthropic", "translate_anthropic"]

_OPTIONS: Final = ("max_tokens", "temperature", "top_p")
_OWN: Final = frozenset({"stream", "cache_control"})
_MAPPED: Final = frozenset({"model", "messages", "system", "tools", "stop_sequences", *_OPTIONS})
_CACHE: Final = frozenset({"cache_control"})
_WIRE: Final = AnthropicWire()


def _refuse(message: str) -> ProxyError:
    return ProxyError(message, kind="invalid_request_error")


def _str(block: Mapping[str, Any], key: str, where: str) -> str:
    value = block.get(key)
    if not isinstance(value, str):
        raise _refuse(f"{where}.{key} must be a string")
    return value


def _system(value: Any) -> str | None:
    try:
        return None if value is None else one_text(value)
    except ValueError:
        raise _refuse(
            "system: the log keeps the system prompt as one text; send one string or one "
            "text block (join the blocks)"
        ) from None


def _tool(tool: Any, where: str) -> FrozenDict:
    if not isinstance(tool, Mapping) or not isinstance(tool.get("name"), str):
        raise _refuse(f"{where} must be an object with a string name")
    kind = tool.get("type")
    if kind not in (None, "custom"):
        raise _refuse(
            f"{where} is a server tool (type {kind!r}), which the log cannot represent; "
            "only client tools with an input_schema can go through the proxy"
        )
    schema: dict[str, Any] = {"name": tool["name"]}
    for key, value in tool.items():
        if key in ("name", "cache_control") or value is None:
            continue
        schema["parameters" if key == "input_schema" else key] = value
    frozen: FrozenDict = freeze(schema, path=where)
    return frozen


def parse_anthropic(body: Mapping[str, Any]) -> ClientRequest:
    """The header part and the raw messages of a Messages body."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _refuse("model: Field required (a non-empty string)")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _refuse("messages: Field required (a non-empty list of message objects)")
    # The rest are checked as they are translated (``Translator.messages``), so
    # that a request extending a known one is not walked message by message.
    if not is_message(messages[0]):
        raise _refuse(NOT_A_MESSAGE)
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise _refuse("tools must be a list")
    options = {k: body[k] for k in _OPTIONS if body.get(k) is not None}
    stop = body.get("stop_sequences")
    if stop is not None:
        if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
            raise _refuse("stop_sequences must be a list of strings")
        options["stop"] = tuple(stop)
    extras = {k: v for k, v in body.items() if k not in _MAPPED and k not in _OWN and v is not None}
    return ClientRequest(
        family="anthropic",
        model=model,
        system=_system(body.get("system")),
        tools=tuple(_tool(t, f"tools[{i}]") for i, t in enumerate(tools or ())),
        options=options,
        extras=extras,
        messages=messages,
        offset=0,
        stream=body.get("stream") is True,
        body=body,
    )


def anthropic_top(body: Mapping[str, Any]) -> dict[str, Any]:
    """The normal form of everything but the messages."""
    out: dict[str, Any] = {}
    for key, value in body.items():
        if value is None or key in _OWN or key == "messages":
            continue
        if key == "system":
            value = text_parts(value)
            if not value:
                continue
        if key in ("tools", "stop_sequences") and value == []:
            continue
        out[key] = normal(value, drop=_CACHE) if key in _MAPPED else Opaque(encode_trusted(value))
    return out


def _form(role: str, content: Any) -> Any:
    """A message's normal form: content as blocks, without cache markers and
    ``"is_error": false``."""
    blocks = [
        {k: v for k, v in b.items() if not (k == "is_error" and v is False)}
        if isinstance(b, Mapping) and b.get("type") == "tool_result"
        else b
        for b in text_parts(content)
    ]
    return normal({"role": role, "content": blocks}, drop=_CACHE)


def _image(block: Mapping[str, Any], where: str) -> dict[str, Any]:
    source = block.get("source")
    at = f"{where}.source"
    if isinstance(source, Mapping) and source.get("type") == "base64":
        media_type, data = _str(source, "media_type", at), _str(source, "data", at)
        return {"type": "image", "media_type": media_type, "data": data}
    if isinstance(source, Mapping) and source.get("type") == "url":
        return {"type": "image", "media_type": "", "url": _str(source, "url", at)}
    raise _refuse(f"{where}: only base64 and url image sources can be represented in the log")


def _result_content(content: Any, where: str) -> Any:
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise _refuse(f"{where}.content must be a string or a list of blocks")
    out: list[dict[str, Any]] = []
    for k, part in enumerate(content):
        ptype = part.get("type") if isinstance(part, Mapping) else None
        if ptype == "text":
            out.append({"type": "text", "text": _str(part, "text", f"{where}.content[{k}]")})
        elif ptype == "image":
            out.append(_image(part, f"{where}.content[{k}]"))
        else:
            raise _refuse(
                f"{where}.content[{k}]: a {ptype!r} block cannot be represented in the log"
            )
    return out


def _assistant_block(block: Mapping[str, Any], where: str) -> dict[str, Any]:
    btype = block.get("type") if isinstance(block, Mapping) else None
    if btype == "text":
        return {"type": "text", "text": _str(block, "text", where)}
    if btype == "thinking":
        text, signature = _str(block, "thinking", where), _str(block, "signature", where)
        return {"type": "reasoning", "text": text, "signature": signature}
    if btype == "redacted_thinking":
        return {"type": "reasoning", "text": "", "data": _str(block, "data", where)}
    if btype == "tool_use":
        return {
            "type": "tool_call",
            "id": _str(block, "id", where),
            "name": _str(block, "name", where),
            "arguments": encode_trusted(block.get("input", {})).decode("utf-8"),
        }
    raise _refuse(f"{where}: a {btype!r} block cannot be represented in the log")


def _neutral(message: Mapping[str, Any], where: str) -> list[dict[str, Any]]:
    role = message["role"]
    content = text_parts(message.get("content"))
    if not isinstance(content, list):
        raise _refuse(f"{where}.content must be a string or a list of blocks")
    if role == "assistant":
        blocks = [_assistant_block(b, f"{where}.content[{k}]") for k, b in enumerate(content)]
        return [{"role": "assistant", "content": blocks}]
    if role != "user":
        raise _refuse(f"{where}: messages with role {role!r} cannot be represented in the log")
    out: list[dict[str, Any]] = []
    for k, block in enumerate(content):
        at = f"{where}.content[{k}]"
        btype = block.get("type") if isinstance(block, Mapping) else None
        if btype == "tool_result":
            result = {
                "type": "tool_result",
                "tool_call_id": _str(block, "tool_use_id", at),
                "content": _result_content(block.get("content"), at),
                "is_error": block.get("is_error") is True,
            }
            out.append({"role": "tool", "content": [result]})
            continue
        if btype == "text":
            piece = {"type": "text", "text": _str(block, "text", at)}
        elif btype == "image":
            piece = _image(block, at)
        else:
            raise _refuse(f"{at}: a {btype!r} block cannot be represented in the log")
        if out and out[-1]["role"] == "user":
            out[-1]["content"].append(piece)
        else:
            out.append({"role": "user", "content": [piece]})
    return out or [{"role": "user", "content": []}]


def translate_anthropic(message: Any, where: str) -> Translated:
    """One client message in the log's terms, checked against the Anthropic wire."""
    if not isinstance(message, Mapping):
        raise _refuse(f"{where} must be an object")
    try:
        neutral = tuple(freeze(m, path=where) for m in _neutral(message, where))
    except (JsonValueError, EventError) as exc:
        raise _refuse(str(exc)) from None
    blocks: list[Any] = []
    try:
        for item in neutral:
            _, mapped = _WIRE.message_blocks(item, where=where)
            blocks.extend(b[0] for b in mapped)
    except (EventError, JsonValueError) as exc:
        raise _refuse(str(exc)) from None
    if not blocks:
        raise _refuse(
            f"{where}: a message without a non-blank block cannot be represented in the log "
            "(the API refuses it, and the log's wire leaves it out)"
        )
    # As the wire groups a user message: its tool results first.
    blocks.sort(key=lambda b: b["type"] != "tool_result")
    found = first_difference(
        _form(message["role"], message.get("content")), _form(message["role"], blocks), where
    )
    if found is not None:
        raise _refuse(found)
    return Translated(messages=neutral, keys=tuple(loose_key(m) for m in neutral), rules=EVERY_RULE)
