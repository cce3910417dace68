"""Payload rules: what each event type's ``data`` must carry (docs/format.md).

The minimum each type needs, and the types of the optional fields the audits
read, so a log that validates is a log every reader can read. ``Session``
checks every event with :func:`check_payload` before it is committed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from tapelog._errors import EventError
from tapelog.log._freeze import FrozenDict

__all__ = [
    "HEADER_REASONS",
    "MESSAGE_ROLES",
    "check_blocks",
    "check_payload",
    "chunk_shape_ok",
]

HEADER_REASONS: Final = ("initial", "resume", "fallback")


# JSON objects as a payload arrives: decoded from a line, or frozen by an append.
_OBJECTS: Final = frozenset({dict, FrozenDict})


def _fail(etype: str, message: str) -> EventError:
    return EventError(f"{etype}: {message}")


def _need(etype: str, data: Mapping[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    if key not in data:
        raise _fail(etype, f"data.{key} is required")
    value = data[key]
    if type(value) is kind:  # the common case: exactly the expected JSON type
        return value
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if kind is int or int in kinds:
        ok = isinstance(value, kinds) and not isinstance(value, bool)
    else:
        ok = isinstance(value, kinds)
    if not ok:
        names = " or ".join(_KIND_NAMES.get(k, k.__name__) for k in kinds)
        raise _fail(etype, f"data.{key} must be {names}, got {_json_type(value)}")
    return value


_KIND_NAMES: Final[dict[type, str]] = {
    int: "an integer",
    str: "a string",
    bool: "a boolean",
    dict: "an object",
    list: "a list",
}


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"


def _check_source(etype: str, data: Mapping[str, Any]) -> None:
    source = _need(etype, data, "source", dict)
    if not isinstance(source.get("kind"), str) or not source["kind"]:
        raise _fail(etype, "data.source.kind must be a non-empty string")


_BLOCK_FIELDS: Final[dict[str, tuple[tuple[str, type | tuple[type, ...]], ...]]] = {
    "text": (("text", str),),
    "reasoning": (("text", str),),
    "tool_call": (("id", str), ("name", str), ("arguments", str)),
    "tool_result": (("tool_call_id", str), ("content", (str, list)), ("is_error", bool)),
    "image": (("media_type", str),),
    "openai_part": (("part", dict),),
    "item": (("item", dict),),
    "wire": (("wire", str), ("block", dict)),
}

_PLAIN_BLOCKS: Final = frozenset({"text", "tool_call", "openai_part", "item", "wire"})
"""Block types with no optional field of their own to check (``extra`` aside)."""

MESSAGE_ROLES: Final = ("developer", "system")
"""The roles a ``user/message`` may name in ``data.role`` (absent: ``user``):
a client's developer or system message, anywhere in the history."""


def check_blocks(content: Any, where: str) -> None:
    """Check a list of content blocks (see docs/format.md, "Content blocks")."""
    if not isinstance(content, list):
        raise EventError(f"{where} must be a list of content blocks, got {_json_type(content)}")
    for i, block in enumerate(content):
        # Where a block is (``at``) is spelled out only when it is wrong: every
        # message of a load passes here.
        if not isinstance(block, dict):
            raise EventError(f"{where}[{i}] must be an object, got {_json_type(block)}")
        btype = block.get("type")
        fields = _BLOCK_FIELDS.get(btype) if isinstance(btype, str) else None
        if fields is None:
            raise EventError(
                f"{where}[{i}].type must be one of {', '.join(sorted(_BLOCK_FIELDS))}, "
                f"got {btype!r}"
            )
        for key, kind in fields:
            if key not in block:
                raise EventError(f"{where}[{i}].{key} is required in a {btype} block")
            if not isinstance(block[key], kind):
                raise EventError(
                    f"{where}[{i}].{key} has the wrong type ({_json_type(block[key])})"
                )
        if btype in _PLAIN_BLOCKS and "extra" not in block:
            continue  # a text or tool_call block: nothing optional to check
        at = f"{where}[{i}]"
        if "extra" in block and not isinstance(block["extra"], dict):
            raise EventError(f"{at}.extra must be an object (the wire block's other fields)")
        if btype == "reasoning":
            for key in ("signature", "data", "id", "encrypted_content"):
                if key in block and not isinstance(block[key], str):
                    raise EventError(f"{at}.{key} must be a string")
            if "summary" in block and not isinstance(block["summary"], list):
                raise EventError(f"{at}.summary must be a list (a Responses reasoning summary)")
        elif btype == "tool_result" and isinstance(block["content"], list):
            check_blocks(block["content"], f"{at}.content")
        elif btype == "image" and not isinstance(block.get("data", block.get("url")), str):
            raise EventError(f"{at} needs a base64 'data' string or a 'url' string")


def _turn(etype: str, data: Mapping[str, Any]) -> None:
    _need(etype, data, "turn", int)


def _turn_end(etype: str, data: Mapping[str, Any]) -> None:
    _need(etype, data, "turn", int)
    reason = _need(etype, data, "reason", dict)
    if not isinstance(reason.get("kind"), str) or not reason["kind"]:
        raise _fail(etype, "data.reason.kind must be a non-empty string")
    if reason["kind"] == "budget":
        _budget_reason(etype, reason)


def _budget_reason(etype: str, reason: Mapping[str, Any]) -> None:
    """A turn a budget ended (the agent's ``Budget``): which limit, its bound, the use."""
    if reason.get("scope") not in ("turn", "session"):
        raise _fail(etype, "data.reason.scope of a budget end must be 'turn' or 'session'")
    if not isinstance(reason.get("limit"), str) or not reason["limit"]:
        raise _fail(etype, "data.reason.limit of a budget end must be a non-empty string")
    for key in ("max", "used"):
        value = reason.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise _fail(etype, f"data.reason.{key} of a budget end must be a non-negative number")


def _step(etype: str, data: Mapping[str, Any]) -> None:
    # The common shape in one test (exact JSON types: what _need accepts first).
    if type(data) in _OBJECTS and type(data.get("turn")) is int and type(data.get("step")) is int:
        return
    _need(etype, data, "turn", int)
    _need(etype, data, "step", int)


def _optional(etype: str, data: Mapping[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    """``data[key]`` checked like :func:`_need` when present (``None`` when absent)."""
    return _need(etype, data, key, kind) if key in data else None


def _check_error(etype: str, data: Mapping[str, Any]) -> None:
    error = _optional(etype, data, "error", dict)
    if error is not None and not isinstance(error.get("message", ""), str):
        raise _fail(etype, "data.error.message must be a string")


def _step_end(etype: str, data: Mapping[str, Any]) -> None:
    _step(etype, data)
    if "sent" in data or "error" in data:  # most steps end naming neither
        _optional(etype, data, "sent", bool)
        _check_error(etype, data)


_USAGE_COUNTS: Final = ("input", "cache_read", "cache_write", "output", "reasoning")


def _check_usage(etype: str, usage: Any, where: str) -> None:
    """Normalised usage: every count present is a non-negative integer."""
    if not isinstance(usage, dict):
        raise _fail(etype, f"{where} must be an object")
    for key in _USAGE_COUNTS:
        if key in usage:
            value = usage[key]
            if type(value) is not int or value < 0:
                raise _fail(
                    etype, f"{where}.{key} must be a non-negative integer, got {_json_type(value)}"
                )


def _seqs(etype: str, value: Any, where: str) -> None:
    if not isinstance(value, list) or not all(type(s) is int and s >= 0 for s in value):
        raise _fail(etype, f"{where} must be a list of seqs (non-negative integers)")


def _fields(etype: str, data: Mapping[str, Any]) -> None:
    """``data.fields``: a message's other wire members, as the client sent them;
    ``data.content_string``: the client sent the content as one string."""
    if "fields" not in data and "content_string" not in data:
        return  # the loop's own messages carry neither
    _optional(etype, data, "fields", dict)
    if _optional(etype, data, "content_string", bool) and (
        len(data["content"]) != 1 or data["content"][0].get("type") != "text"
    ):
        raise _fail(etype, "data.content_string needs content of exactly one text block")


def _message(etype: str, data: Mapping[str, Any]) -> None:
    check_blocks(_need(etype, data, "content", list), f"{etype}: data.content")
    _check_source(etype, data)
    _fields(etype, data)
    role = _optional(etype, data, "role", str)
    if role is not None and (etype != "user/message" or role not in MESSAGE_ROLES):
        raise _fail(
            etype,
            f"data.role must be one of {', '.join(MESSAGE_ROLES)} (absent: user), got {role!r}",
        )
    key = data.get("idempotency_key")  # a user/message's: how a re-run finds its prompt
    if "idempotency_key" in data and (
        etype != "user/message" or not isinstance(key, str) or not key
    ):
        raise _fail(etype, "data.idempotency_key must be a non-empty string, on a user/message")


def chunk_shape_ok(data: Any) -> bool:
    """Whether an ``assistant/chunk`` payload has the common shape (exact JSON
    types: what the full check accepts first). The most frequent event of a
    log, checked in one expression; ``False`` says nothing: the full check
    (:func:`check_payload`) decides, and names what is wrong."""
    chunk: Any = data.get("chunk") if type(data) in _OBJECTS else None
    return (
        type(chunk) in _OBJECTS
        and type(chunk.get("kind")) is str
        and type(data.get("turn")) is int
        and type(data.get("step")) is int
    )


def _chunk(etype: str, data: Mapping[str, Any]) -> None:
    if chunk_shape_ok(data):
        return
    _step(etype, data)
    chunk = _need(etype, data, "chunk", dict)
    if not isinstance(chunk.get("kind"), str):
        raise _fail(etype, "data.chunk.kind must be a string")


def _assistant(etype: str, data: Mapping[str, Any]) -> None:
    _step(etype, data)
    check_blocks(_need(etype, data, "content", list), f"{etype}: data.content")
    source = _need(etype, data, "source", dict)
    for key in ("provider", "model"):
        if not isinstance(source.get(key), str):
            raise _fail(etype, f"data.source.{key} must be a string")
    if "usage" in data:
        _check_usage(etype, data["usage"], "data.usage")
    if "interrupted" in data and not isinstance(data["interrupted"], bool):
        raise _fail(etype, "data.interrupted must be a boolean")
    _fields(etype, data)
    if "alternatives" not in data:
        return
    for i, alternative in enumerate(_optional(etype, data, "alternatives", list) or ()):
        at = f"data.alternatives[{i}]"
        if not isinstance(alternative, dict) or type(alternative.get("choice")) is not int:
            raise _fail(etype, f"{at} must be an object with an integer choice")
        check_blocks(alternative.get("content"), f"{etype}: {at}.content")


def _tool_call(etype: str, data: Mapping[str, Any]) -> None:
    _step(etype, data)
    _need(etype, data, "call_id", str)
    _need(etype, data, "name", str)
    _need(etype, data, "arguments", str)


def _tool_approval(etype: str, data: Mapping[str, Any]) -> None:
    """A human-in-the-loop decision on a logged tool call (the agent's approver)."""
    _step(etype, data)
    _need(etype, data, "call_id", str)
    _need(etype, data, "approved", bool)
    if not _need(etype, data, "by", str):
        raise _fail(etype, "data.by must name who decided (a non-empty string)")
    _optional(etype, data, "reason", str)


def _tool_result(etype: str, data: Mapping[str, Any]) -> None:
    _step(etype, data)
    _need(etype, data, "call_id", str)
    content = _need(etype, data, "content", (str, list))
    if isinstance(content, list):
        check_blocks(content, f"{etype}: data.content")
    _need(etype, data, "is_error", bool)
    _optional(etype, data, "extra", dict)
    omit = _optional(etype, data, "omit", list)
    if omit is not None and not all(isinstance(k, str) for k in omit):
        raise _fail(etype, "data.omit must be a list of field names")
    if "error" in data and not isinstance(data["error"], (str, dict)):
        raise _fail(etype, "data.error must be a string or an object")
    _fields(etype, data)


def _header(etype: str, data: Mapping[str, Any]) -> None:
    _need(etype, data, "header", dict)
    reason = _need(etype, data, "reason", str)
    if reason not in HEADER_REASONS:
        raise _fail(
            etype, f"data.reason must be one of {', '.join(HEADER_REASONS)}, got {reason!r}"
        )


_DELTA_KEYS: Final = ("system", "tools", "config", "prefix")


def _header_delta(etype: str, data: Mapping[str, Any]) -> None:
    keys = [k for k in data if k in _DELTA_KEYS]
    if not keys:
        raise _fail(etype, "a delta needs at least one of system, tools, config, prefix")
    extra = [k for k in data if k not in _DELTA_KEYS]
    if extra:
        raise _fail(etype, f"unknown delta field {extra[0]!r}")


def _compact_start(etype: str, data: Mapping[str, Any]) -> None:
    _optional(etype, data, "id", str)
    _optional(etype, data, "trigger", str)
    if data.get("turn") is not None:
        _need(etype, data, "turn", int)
    _optional(etype, data, "context_tokens", int)
    if "region" in data:
        _seqs(etype, data["region"], "data.region")
        if data["region"]:
            _need(etype, data, "instruction", str)
            if _need(etype, data, "max_tokens", int) < 1:
                raise _fail(etype, "data.max_tokens must be at least 1")


def _summary(etype: str, data: Mapping[str, Any]) -> None:
    _need(etype, data, "provider", str)
    _need(etype, data, "model", str)
    _need(etype, data, "max_tokens", int)
    _optional(etype, data, "id", str)
    if "usage" in data:
        _check_usage(etype, data["usage"], "data.usage")
    shadowed = _optional(etype, data, "shadowed", dict)
    if shadowed is not None and not all(type(shadowed.get(k)) is int for k in ("start", "end")):
        raise _fail(etype, "data.shadowed needs integer start and end seqs")
    if "shadowed_seqs" in data:
        _seqs(etype, data["shadowed_seqs"], "data.shadowed_seqs")
    for key in ("shadowed_tokens", "summary_tokens"):
        _optional(etype, data, key, int)


def _compact_end(etype: str, data: Mapping[str, Any]) -> None:
    _optional(etype, data, "id", str)
    _optional(etype, data, "ok", bool)
    _optional(etype, data, "sent", bool)
    _check_error(etype, data)


def _end_seed(etype: str, data: Mapping[str, Any]) -> None:
    _optional(etype, data, "parent", str)
    _optional(etype, data, "seed_length", int)


def _origin(etype: str, data: Mapping[str, Any]) -> None:
    """Where a session came from (the proxy logs it first): the session it
    branched from and where, and the client's own id of its conversation."""
    parent = _optional(etype, data, "parent", str)
    seq = _optional(etype, data, "parent_seq", int)
    if parent is None and seq is not None:
        raise _fail(etype, "data.parent_seq needs data.parent")
    if seq is not None and seq < 0:
        raise _fail(etype, "data.parent_seq must not be negative")
    _optional(etype, data, "why", str)
    client = _optional(etype, data, "client", dict)
    if client is not None and not all(type(client.get(k)) is str for k in ("signal", "id")):
        raise _fail(etype, "data.client needs string signal and id")
    if parent is None and client is None:
        raise _fail(etype, "an origin needs a parent or a client")


_HEX: Final = frozenset("0123456789abcdef")


def _digest(etype: str, data: Mapping[str, Any]) -> None:
    """A checkpoint written by a store at a flush: the SHA-256 of every byte of
    the session file before this event's line (docs/format.md, "Digests")."""
    covered = _need(etype, data, "bytes", int)
    if covered < 1:
        raise _fail(etype, "data.bytes must be a positive integer (the header line comes first)")
    sha = _need(etype, data, "sha256", str)
    if len(sha) != 64 or not _HEX.issuperset(sha):
        raise _fail(etype, "data.sha256 must be 64 lowercase hexadecimal digits")
    extra = [k for k in data if k not in ("bytes", "sha256")]
    if extra:
        raise _fail(etype, f"unknown field {extra[0]!r}")


_RULES: Final[dict[str, Callable[[str, Mapping[str, Any]], None]]] = {
    "turn/start": _turn,
    "turn/end": _turn_end,
    "step/start": _step,
    "step/end": _step_end,
    "user/message": _message,
    "context/message": _message,
    "assistant/chunk": _chunk,
    "assistant/message": _assistant,
    "tool/call": _tool_call,
    "tool/approval": _tool_approval,
    "tool/result": _tool_result,
    "request/header": _header,
    "request/header-delta": _header_delta,
    "compact/start": _compact_start,
    "compact/summary": _summary,
    "compact/end": _compact_end,
    "session/origin": _origin,
    "session/end-seed": _end_seed,
    "log/digest": _digest,
}


def check_payload(etype: str, data: Mapping[str, Any]) -> None:
    """Raise :class:`EventError` unless ``data`` carries what ``etype`` requires."""
    rule = _RULES.get(etype)
    if rule is None:
        raise EventError(f"unknown event type {etype!r}; known types: {', '.join(sorted(_RULES))}")
    rule(etype, data)
