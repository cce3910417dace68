"""An OpenAI chat completions request body -> the log's terms, and its normal form.

``messages[0]`` is the system prompt when it is a ``system`` message of one
text (a string or one text part) and nothing else; every other message maps
one to one to a neutral message:

* ``user``, and ``developer`` / ``system`` anywhere (their role kept): a
  string or parts. A text part is a text block, an ``image_url`` part with
  only a URL an image block (a ``data:`` URL becomes base64 data); any other
  part, and one text part sent as a list, is an ``openai_part`` block that
  keeps it as given;
* ``assistant``: ``reasoning_content`` (a reasoning block; an empty one on a
  message with tool calls is no block, which is how the OpenAI wire writes a
  tool-call turn without reasoning), the text (content sent as a list of
  parts: each an ``openai_part``), then the tool calls with their
  ``arguments`` string as sent;
* ``tool``: a ``tool_result`` block whose content is the string sent, or its
  parts, each an ``openai_part``.

A function tool is a header tool schema (its name, then the function's
other members); any other tool is kept whole as ``openai_tool``.

Members of a message these do not name (``name``, ``refusal``, ...) are its
``fields``, in the client's order, and so is the client's spelling of an
empty ``content`` where the wire would spell it otherwise (docs/format.md).
Standard fields become ``LlmCallConfig`` fields (``max_tokens`` and
``max_completion_tokens`` are one field, its spelling a wire option when it is
not the upstream dialect's: ``_translate``; a ``stop`` string is one sequence,
sent as a string again by the wire option ``stop_string``); ``stream`` and
``stream_options`` are the proxy's own (the upstream always streams, with
usage); every other field (``n`` included) goes to ``config.extras`` as given.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from tapelog._errors import EventError, HeaderError, JsonValueError, ProxyError
from tapelog.llm._api import OpenAIWire, empty_content, no_text
from tapelog.log._api import FrozenDict, encode_trusted, freeze
from tapelog.proxy._keys import loose_key
from tapelog.proxy._normal import Opaque, first_difference, normal, one_text, text_parts
from tapelog.proxy._types import (
    ALL_RULES,
    EVERY_RULE,
    NOT_A_MESSAGE,
    ClientRequest,
    Translated,
    is_message,
)

__all__ = ["openai_top", "parse_openai", "translate_openai"]

_OPTIONS: Final = ("temperature", "top_p", "seed", "reasoning_effort")
_OWN: Final = frozenset({"stream", "stream_options"})
_MAPPED: Final = frozenset(
    {"model", "messages", "tools", "max_tokens", "max_completion_tokens", "stop", *_OPTIONS}
)
_DATA_URL: Final = re.compile(r"data:([^;,]+);base64,(.*)", re.DOTALL)
_TEXT_KEYS: Final = {"type": "", "text": ""}.keys()
_FUNCTION_KEYS: Final = {"type": "", "function": ""}.keys()
_IMAGE_KEYS: Final = {"type": "", "image_url": ""}.keys()
_URL_KEYS: Final = {"url": ""}.keys()
_NO_SPELLING: Final = object()
_KNOWN: Final[Mapping[str, frozenset[str]]] = {
    "user": frozenset({"role", "content"}),
    "developer": frozenset({"role", "content"}),
    "system": frozenset({"role", "content"}),
    "assistant": frozenset({"role", "content", "tool_calls", "reasoning_content"}),
    "tool": frozenset({"role", "content", "tool_call_id"}),
}
"""The members of each role's message that the log's blocks hold; any other
member goes to the message's ``fields``."""


def _refuse(message: str) -> ProxyError:
    return ProxyError(message, kind="invalid_request_error")


def _leading_system(messages: list[Any]) -> bool:
    """Whether ``messages[0]`` is the header's system prompt: a ``system``
    message of one text (a string or one text part) and nothing else. Any
    other system or developer message is a history message with its role."""
    first = messages[0]
    if first.get("role") != "system" or any(
        v is not None for k, v in first.items() if k not in ("role", "content")
    ):
        return False
    try:
        return one_text(first.get("content")) is not None
    except ValueError:
        return False


def _tool(tool: Any, where: str) -> FrozenDict:
    """A header tool: a function tool as its schema (``name`` first, then the
    function's other members), any other tool (``custom``, a function tool
    with more members, a type tapelog does not know) as ``openai_tool``, the
    tool as given, under the name it has."""
    if not isinstance(tool, Mapping):
        raise _refuse(f"{where} must be an object, not {type(tool).__name__}")
    kind = tool.get("type")
    inner = tool.get(kind) if isinstance(kind, str) else None
    name = inner.get("name") if isinstance(inner, Mapping) else tool.get("name")
    if not isinstance(name, str) or not name:
        raise _refuse(f"{where} must name the tool (a string {kind}.name)")
    if kind != "function" or tool.keys() != _FUNCTION_KEYS:
        frozen_tool: FrozenDict = freeze({"name": name, "openai_tool": tool}, path=where)
        return frozen_tool
    assert isinstance(inner, Mapping)
    schema = {"name": name}
    schema.update((k, v) for k, v in inner.items() if k != "name" and v is not None)
    frozen: FrozenDict = freeze(schema, path=where)
    return frozen


def _options(body: Mapping[str, Any]) -> dict[str, Any]:
    options: dict[str, Any] = {}
    limits = {
        k: body[k] for k in ("max_tokens", "max_completion_tokens") if body.get(k) is not None
    }
    if len(set(map(repr, limits.values()))) > 1:
        raise _refuse(
            "max_tokens and max_completion_tokens differ; the log keeps one token limit, "
            "send one of them"
        )
    if limits:
        options["max_tokens"] = next(iter(limits.values()))
    for key in _OPTIONS:
        if body.get(key) is not None:
            options[key] = body[key]
    stop = body.get("stop")
    if isinstance(stop, str):
        options["stop"] = (stop,)
    elif isinstance(stop, list) and all(isinstance(s, str) for s in stop):
        options["stop"] = tuple(stop)
    elif stop is not None:
        raise _refuse("stop must be a string or a list of strings")
    return options


def parse_openai(body: Mapping[str, Any]) -> ClientRequest:
    """The header part and the raw messages of a chat completions body."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _refuse("model must be a non-empty string")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _refuse("messages must be a non-empty list of message objects")
    # The rest are checked as they are translated (``Translator.messages``), so
    # that a request extending a known one is not walked message by message.
    if not is_message(messages[0]):
        raise _refuse(NOT_A_MESSAGE)
    offset = 1 if _leading_system(messages) else 0
    system = one_text(messages[0].get("content")) if offset else None
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise _refuse("tools must be a list")
    # Every other field as given, ``null`` ones too: the upstream gets them as sent.
    extras = {k: v for k, v in body.items() if k not in _MAPPED and k not in _OWN}
    return ClientRequest(
        family="openai",
        model=model,
        system=system,
        tools=tuple(_tool(t, f"tools[{i}]") for i, t in enumerate(tools or ())),
        options=_options(body),
        extras=extras,
        messages=messages[offset:],
        offset=offset,
        stream=body.get("stream") is True,
        body=body,
    )


def openai_top(body: Mapping[str, Any]) -> dict[str, Any]:
    """The normal form of everything but the history (the system message included)."""
    out: dict[str, Any] = {}
    for key, value in body.items():
        if value is None or key in _OWN:
            continue
        if key == "messages":
            system = value[:1] if value and _leading_system(value) else []
            out["messages"] = [_form(m) for m in system]
            continue
        if key in ("max_tokens", "max_completion_tokens"):
            key = "max_tokens"
        elif key == "stop" and isinstance(value, str):
            value = [value]
        if key in ("tools", "stop") and value == []:
            continue
        out[key] = normal(value) if key in _MAPPED else Opaque(encode_trusted(value))
    return out


def _form(message: Mapping[str, Any]) -> Any:
    """A message's normal form (see ``_normal``)."""
    out = dict(message)
    if "content" in out:
        out["content"] = text_parts(out["content"])
        if not out["content"]:
            del out["content"]
    if out.get("tool_calls") == []:
        del out["tool_calls"]
    return normal(out)


def _image(part: Mapping[str, Any], where: str) -> dict[str, Any]:
    image = part.get("image_url")
    url = image.get("url") if isinstance(image, Mapping) else None
    if not isinstance(url, str):
        raise _refuse(f"{where}.image_url.url must be a string")
    found = _DATA_URL.fullmatch(url)
    if found is not None:
        return {"type": "image", "media_type": found.group(1), "data": found.group(2)}
    return {"type": "image", "media_type": "", "url": url}


def _user_blocks(content: Any, where: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if not isinstance(content, list):
        raise _refuse(f"{where}.content must be a string or a list of parts")
    blocks: list[dict[str, Any]] = []
    for k, part in enumerate(content):
        if not isinstance(part, Mapping):
            raise _refuse(f"{where}.content[{k}] must be an object")
        ptype = part.get("type")
        lone = len(content) == 1  # one text part is a list on the wire, not a string
        if (
            ptype == "text"
            and isinstance(part.get("text"), str)
            and part.keys() == _TEXT_KEYS
            and not lone
        ):
            blocks.append({"type": "text", "text": part["text"]})
        elif ptype == "image_url" and _plain_image(part):
            blocks.append(_image(part, f"{where}.content[{k}]"))
        else:
            # Any other part (input_audio, file, an image with a detail, a part
            # with more members, a type this module does not know) is carried
            # as given.
            blocks.append({"type": "openai_part", "part": part})
    return blocks


def _plain_image(part: Mapping[str, Any]) -> bool:
    """An ``image_url`` part that the log's ``image`` block reproduces exactly."""
    image = part.get("image_url")
    return (
        part.keys() == _IMAGE_KEYS
        and isinstance(image, Mapping)
        and image.keys() == _URL_KEYS
        and isinstance(image.get("url"), str)
    )


def _fields(
    message: Mapping[str, Any], known: frozenset[str], empty: Any = _NO_SPELLING
) -> dict[str, Any]:
    """The members of a client message the log's blocks do not name, in the
    client's order (``null`` ones too: the upstream gets them as sent), and,
    for a message without text whose ``content`` is not spelled ``empty`` (the
    wire's default), the client's spelling of it (``null``, ``""``, ``[]``)."""
    return {
        k: v
        for k, v in message.items()
        if k not in known or (k == "content" and empty is not _NO_SPELLING and v != empty)
    }


def _assistant_blocks(message: Mapping[str, Any], where: str) -> list[dict[str, Any]]:
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        raise _refuse(f"{where}.tool_calls must be a list")
    blocks: list[dict[str, Any]] = []
    reasoning = message.get("reasoning_content")
    if isinstance(reasoning, str) and (reasoning or not calls):
        blocks.append({"type": "reasoning", "text": reasoning})
    content = message.get("content")
    if isinstance(content, list):  # a list of parts goes back as that list
        blocks.extend({"type": "openai_part", "part": p} for p in content)
    else:
        blocks.extend(_user_blocks(content or "", where))
    for k, call in enumerate(calls):
        function = call.get("function") if isinstance(call, Mapping) else None
        if (
            not isinstance(function, Mapping)
            or not isinstance(call.get("id"), str)
            or not isinstance(function.get("name"), str)
            or not isinstance(function.get("arguments"), str)
        ):
            raise _refuse(
                f"{where}.tool_calls[{k}] must have a string id and a function with a string "
                "name and arguments"
            )
        blocks.append(
            {
                "type": "tool_call",
                "id": call["id"],
                "name": function["name"],
                "arguments": function["arguments"],
            }
        )
    if not blocks and not _fields(message, _KNOWN["assistant"]):
        raise _refuse(
            f"{where}: an assistant message with no content cannot be represented in the log "
            "(it would not be sent); leave it out"
        )
    return blocks


def _neutral(message: Mapping[str, Any], where: str) -> dict[str, Any]:
    role = message["role"]
    known = _KNOWN.get(role)
    if known is None:
        raise _refuse(f"{where}: messages with role {role!r} cannot be represented in the log")
    out: dict[str, Any]
    if role == "assistant":
        out = {"role": "assistant", "content": _assistant_blocks(message, where)}
    elif role == "tool":
        call_id = message.get("tool_call_id")
        if not isinstance(call_id, str):
            raise _refuse(f"{where}.tool_call_id must be a string")
        content = message.get("content")
        result: Any = content
        if isinstance(content, list):  # parts go back as those parts
            result = [{"type": "openai_part", "part": p} for p in content]
        elif not isinstance(content, str):
            raise _refuse(f"{where}.content must be a string or a list of parts")
        block = {"type": "tool_result", "tool_call_id": call_id, "content": result}
        out = {"role": "tool", "content": [{**block, "is_error": False}]}
    else:  # user, and developer / system anywhere in the history
        out = {"role": role, "content": _user_blocks(message.get("content"), where)}
    spelled = empty_content(out) if role != "tool" and no_text(out) else _NO_SPELLING
    fields = _fields(message, known, spelled)
    if fields:
        out["fields"] = fields
    return out


def translate_openai(message: Any, where: str, *, dialect: str) -> Translated:
    """One client message in the log's terms, checked against the wire of ``dialect``
    under every reasoning send-back rule (the rules that reproduce it are kept)."""
    if not isinstance(message, Mapping):
        raise _refuse(f"{where} must be an object")
    try:
        neutral: FrozenDict = freeze(_neutral(message, where), path=where)
    except JsonValueError as exc:
        raise _refuse(str(exc)) from None
    client = _form(message)
    rules: list[str] = []
    problem: str | None = None
    candidates = ALL_RULES if neutral["role"] == "assistant" else ALL_RULES[:1]
    for rule in candidates:
        wire = OpenAIWire(dialect=dialect, send_back=rule)  # type: ignore[arg-type]
        try:
            piece = wire.message(neutral, model="-", where=where)
        except (EventError, HeaderError) as exc:
            raise _refuse(str(exc)) from None
        found = first_difference(client, _form(piece), where)
        if found is None:
            rules.append(rule)
        elif problem is None:
            problem = found
    if not rules:
        assert problem is not None
        raise _refuse(problem)
    every = neutral["role"] != "assistant" or len(rules) == len(ALL_RULES)
    return Translated(
        messages=(neutral,),
        keys=(loose_key(neutral),),
        rules=EVERY_RULE if every else frozenset(rules),
    )
