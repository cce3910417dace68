"""An Anthropic Messages request body -> the log's terms, carried exactly.

The rule is *carry, never reshape* (docs/proxy.md): the body rebuilt from the
log parses equal to the client's, except ``stream`` (the proxy always streams
from the upstream). So:

* ``system`` is kept as given: a string, or a list of blocks with every field
  (``cache_control`` included); ``tools`` keep every field (``input_schema``
  is logged as ``parameters``; server tools of any ``type`` as given);
* a message becomes neutral messages block by block: a ``user`` message's
  ``tool_result`` blocks one ``tool`` message each, its other blocks one
  ``user`` message; a ``system`` message keeps its role; an ``assistant``
  message's ``text``, ``thinking`` (signature kept), ``redacted_thinking``
  (data kept) and ``tool_use`` blocks the neutral blocks for them. A client
  field the neutral block does not model (``cache_control``, ``citations``,
  ``caller``, an explicit ``"is_error": false``...) goes into the block's
  ``extra``; a block type the log does not model (``server_tool_use``,
  ``web_search_tool_result``, ``document``, ``search_result``, an image from
  a file...) is a ``wire`` block holding it as given; string content is kept
  as a string (``content_string``), and a message's own fields besides
  ``role`` and ``content`` (``output_config``...) as its ``fields``;
* ``model``, ``max_tokens``, ``temperature``, ``top_p`` and
  ``stop_sequences`` are config fields, every other top-level field (``thinking``,
  ``context_management``, ``metadata``, ``tool_choice``...) goes to
  ``config.extras`` in the client's order; the cache markers stay where the
  client put them (``config.wire.cache_markers: "client"``), the request's
  query string is ``config.wire.query`` and its ``anthropic-beta`` /
  ``anthropic-version`` headers are ``config.headers``.

Each message is then sent back through the wire and compared with the
client's; a message that would still differ (a field that cannot be carried)
is refused with a sentence naming it, before anything is logged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from tapelog._errors import EventError, JsonValueError, ProxyError
from tapelog.llm._api import AnthropicWire
from tapelog.log._api import MODEL_HEADERS, FrozenDict, encode_trusted, freeze
from tapelog.proxy._keys import loose_key
from tapelog.proxy._normal import Opaque, first_difference, normal
from tapelog.proxy._types import (
    EVERY_RULE,
    NOT_A_MESSAGE,
    ClientRequest,
    Translated,
    is_message,
)

__all__ = ["anthropic_top", "client_wire_options", "parse_anthropic", "translate_anthropic"]

_OPTIONS: Final = ("max_tokens", "temperature", "top_p")
_OWN: Final = frozenset({"stream"})
_MAPPED: Final = frozenset({"model", "messages", "system", "tools", "stop_sequences", *_OPTIONS})
_WIRE: Final = AnthropicWire()
_ROLES: Final = ("user", "assistant", "system")
_OMITTABLE: Final = frozenset({"content"})
"""Fields of the wire's block a client may leave out (``omit``): a tool result's
content (the API reads a missing one as empty)."""


def _refuse(message: str) -> ProxyError:
    return ProxyError(message, kind="invalid_request_error")


def _system(value: Any) -> str | list[Any] | None:
    if value is None or isinstance(value, str):
        return value or None
    if not isinstance(value, list) or not all(
        isinstance(b, Mapping) and isinstance(b.get("type"), str) for b in value
    ):
        raise _refuse("system must be a string or a list of blocks (objects with a type)")
    return value


def _tool(tool: Any, where: str) -> FrozenDict:
    if not isinstance(tool, Mapping) or not isinstance(tool.get("name"), str):
        raise _refuse(f"{where} must be an object with a string name")
    # Every field kept, in the client's order; the schema under the log's name.
    schema = {("parameters" if key == "input_schema" else key): v for key, v in tool.items()}
    if "parameters" not in schema and tool.get("type") in (None, "custom"):
        raise _refuse(f"{where}.input_schema: Field required")
    frozen: FrozenDict = freeze(schema, path=where)
    return frozen


def client_wire_options(query: str) -> dict[str, Any]:
    """The wire options the proxy logs for an Anthropic client: its own cache
    markers, and its query string (``beta=true``) when it sent one."""
    wire: dict[str, Any] = {"cache_markers": "client"}
    if query:
        wire["query"] = query
    return wire


def model_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The client's request headers that change what the model reads."""
    return {name: headers[name] for name in MODEL_HEADERS if name in headers}


def parse_anthropic(
    body: Mapping[str, Any], headers: Mapping[str, str] | None = None, query: str = ""
) -> ClientRequest:
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
    extras = {k: v for k, v in body.items() if k not in _MAPPED and k not in _OWN}
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
        headers=model_headers(headers or {}),
        wire=client_wire_options(query),
    )


def anthropic_top(body: Mapping[str, Any]) -> dict[str, Any]:
    """The normal form of everything but the messages."""
    out: dict[str, Any] = {}
    for key, value in body.items():
        if value is None or key in _OWN or key == "messages":
            continue
        if key in ("tools", "stop_sequences", "system") and value in ([], ""):
            continue
        out[key] = normal(value) if key in _MAPPED else Opaque(encode_trusted(value))
    return out


def _wire_block(block: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "wire", "wire": "anthropic", "block": block}


def _sent(role: str, neutral: Mapping[str, Any]) -> Any:
    """What the wire sends for one neutral block (``None``: nothing)."""
    try:
        _, mapped = _WIRE.message_blocks(freeze({"role": role, "content": [neutral]}))
    except (EventError, JsonValueError, KeyError, TypeError):
        return None
    return mapped[0][0] if len(mapped) == 1 else None


def _carried(role: str, block: Mapping[str, Any], neutral: dict[str, Any] | None) -> Any:
    """``neutral`` with an ``extra`` for the client's fields it does not model,
    or ``None`` when the wire cannot send it back as given."""
    if neutral is None:
        return None
    sent = _sent(role, neutral)
    if sent is None:
        return None
    omit = [k for k in sent if k not in block]
    if any(k not in _OMITTABLE for k in omit):
        return None
    extra = {k: v for k, v in block.items() if k not in sent or sent[k] != v}
    if extra:
        neutral["extra"] = extra
    if omit:
        neutral["omit"] = omit
    return neutral


def _known(role: str, block: Mapping[str, Any]) -> dict[str, Any] | None:
    """The neutral block a client block maps to (without ``extra``), if any."""
    btype = block.get("type")
    text = block.get("text")
    if btype == "text" and isinstance(text, str):
        return {"type": "text", "text": text}
    if btype == "image":
        source = block.get("source")
        if isinstance(source, Mapping) and source.get("type") == "base64":
            media_type, data = source.get("media_type"), source.get("data")
            if isinstance(media_type, str) and isinstance(data, str):
                return {"type": "image", "media_type": media_type, "data": data}
        url = source.get("url") if isinstance(source, Mapping) else None
        if isinstance(source, Mapping) and source.get("type") == "url" and isinstance(url, str):
            return {"type": "image", "media_type": "", "url": url}
        return None
    if role != "assistant":
        return None
    if btype == "thinking":
        thinking, signature = block.get("thinking"), block.get("signature")
        if isinstance(thinking, str) and isinstance(signature, str):
            return {"type": "reasoning", "text": thinking, "signature": signature}
    if btype == "redacted_thinking" and isinstance(block.get("data"), str):
        return {"type": "reasoning", "text": "", "data": block["data"]}
    if (
        btype == "tool_use"
        and isinstance(block.get("id"), str)
        and isinstance(block.get("name"), str)
        and isinstance(block.get("input"), Mapping)
    ):
        arguments = encode_trusted(block["input"]).decode("utf-8")
        return {
            "type": "tool_call",
            "id": block["id"],
            "name": block["name"],
            "arguments": arguments,
        }
    return None


def _block(role: str, block: Any, where: str) -> dict[str, Any]:
    """A client block as a neutral block carrying every field."""
    if not isinstance(block, Mapping) or not isinstance(block.get("type"), str):
        raise _refuse(f"{where} must be a block (an object with a string type)")
    carried = _carried(role, block, _known(role, block))
    if carried is None and block["type"] == "tool_use":
        raise _refuse(f"{where}: a tool_use block needs a string id and name and an object input")
    out: dict[str, Any] = carried if carried is not None else _wire_block(block)
    return out


def _result(block: Mapping[str, Any], where: str) -> dict[str, Any]:
    """A ``tool_result`` block as a neutral tool message's block."""
    call_id = block.get("tool_use_id")
    if not isinstance(call_id, str):
        raise _refuse(f"{where}.tool_use_id must be a string")
    content = block.get("content", "")
    if isinstance(content, list):
        content = [_block("user", p, f"{where}.content[{k}]") for k, p in enumerate(content)]
    elif not isinstance(content, str):
        raise _refuse(f"{where}.content must be a string or a list of blocks")
    result = {
        "type": "tool_result",
        "tool_call_id": call_id,
        "content": content,
        "is_error": block.get("is_error") is True,
    }
    carried: dict[str, Any] | None = _carried("tool", block, result)
    if carried is None:
        raise _refuse(f"{where}: this tool_result cannot be sent back as given")
    return carried


def _neutral(message: Mapping[str, Any], where: str) -> list[dict[str, Any]]:
    role = message["role"]
    if role not in _ROLES:
        raise _refuse(f"{where}: messages with role {role!r} cannot be represented in the log")
    messages = _split(role, message.get("content"), where)
    extra = {k: v for k, v in message.items() if k not in ("role", "content")}
    string = isinstance(message.get("content"), str)
    if extra or string:
        # Fields of the message itself: kept on the one neutral message it is.
        if len(messages) != 1 or messages[0]["role"] == "tool":
            raise _refuse(
                f"{where}: a message with fields of its own ({', '.join(extra) or 'content'}) "
                "must not mix tool results with other blocks to be carried as given"
            )
        if string:
            messages[0]["content_string"] = True
        if extra:
            messages[0]["fields"] = extra
    return messages


def _split(role: str, content: Any, where: str) -> list[dict[str, Any]]:
    """A message's content as neutral messages (a user message's tool results apart)."""
    if isinstance(content, str):
        return [{"role": role, "content": [{"type": "text", "text": content}]}]
    if not isinstance(content, list):
        raise _refuse(f"{where}.content must be a string or a list of blocks")
    if role != "user":
        blocks = [_block(role, b, f"{where}.content[{k}]") for k, b in enumerate(content)]
        return [{"role": role, "content": blocks}]
    messages: list[dict[str, Any]] = []
    for k, block in enumerate(content):
        at = f"{where}.content[{k}]"
        if isinstance(block, Mapping) and block.get("type") == "tool_result":
            messages.append({"role": "tool", "content": [_result(block, at)]})
            continue
        piece = _block("user", block, at)
        if messages and messages[-1]["role"] == "user":
            messages[-1]["content"].append(piece)
        else:
            messages.append({"role": "user", "content": [piece]})
    return messages or [{"role": "user", "content": []}]


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
    first = neutral[0]
    string = first.get("content_string") and len(blocks) == 1
    rebuilt = {
        "role": message["role"],
        "content": blocks[0]["text"] if string else blocks,
        **first.get("fields", {}),
    }
    client, rebuilt = normal(dict(message)), normal(rebuilt)
    found = first_difference(client, rebuilt, where)
    if found is not None:
        raise _refuse(found)
    return Translated(messages=neutral, keys=tuple(loose_key(m) for m in neutral), rules=EVERY_RULE)
