"""What the emulator's Responses endpoint checks and keeps about request input.

The real API refuses an input whose tool items do not pair up, a reasoning
item whose ``encrypted_content`` was altered, a reasoning item sent back by id
only when nothing was stored, an unknown ``previous_response_id`` and a
``text.format`` schema without its name. A wire or proxy bug that drops or
reshapes such an item only shows up against the real API, so these checks give
the same status and error (each message names where it was seen; docs/emulator.md,
"Responses API"). :class:`ResponseMemory` keeps stored responses (``store`` is
true unless sent false) so ``previous_response_id`` works, bounded in size.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections import Counter, OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from tapelog.emulator._render import Conversation
from tapelog.log import decode, encode

__all__ = [
    "Refused",
    "ResponseMemory",
    "check_input",
    "earlier_items",
    "input_items",
    "seal_reasoning",
    "summarize_items",
]

# A fixed key: the emulator is deterministic, and the check only has to notice
# that a client changed the bytes it was given.
_SEAL_KEY: Final = b"tapelog-emulator-reasoning-seal"
# openai/codex#8145 and #8132 (the message abbreviates the content as gAAA...DQ==).
_UNVERIFIED = "The encrypted content {short} could not be verified."
# vercel/ai#7543, can1357/oh-my-pi#41 (a 404 with param "input").
_NOT_PERSISTED = (
    "Item with id '{id}' not found. Items are not persisted when `store` is set to false."
    " Try again with `store` set to true, or remove this item from your input."
)
# maximhq/bifrost#2441 (400, code previous_response_not_found).
_NO_PREVIOUS = "Previous response with id '{id}' not found."
# continuedev/continue#10092, router-for-me/CLIProxyAPI#2368 (param "input", code null).
_NO_CALL = "No tool call found for function call output with call_id {id}."
_NO_OUTPUT = "No tool output found for function call {id}."
# openai/openai-node#1404 (param text.format.name, code missing_required_parameter).
_MISSING = "Missing required parameter: '{param}'."


@dataclass(frozen=True, slots=True)
class Refused:
    """A request the real API refuses: status, message, ``param`` and ``code``."""

    status: int
    message: str
    param: str | None = None
    code: str | None = None


def _mac(payload: str) -> bytes:
    digest = hmac.new(_SEAL_KEY, payload.encode("utf-8", "surrogatepass"), hashlib.sha256)
    return digest.hexdigest()[:32].encode("ascii")


def seal_reasoning(item_id: str, reasoning: str) -> str:
    """The opaque ``encrypted_content`` of a reasoning item: the reasoning, signed."""
    payload = base64.urlsafe_b64encode(encode({"id": item_id, "reasoning": reasoning}))
    text = payload.decode("ascii")
    return f"{text}.{_mac(text).decode('ascii')}"


def _verified(content: str) -> bool:
    """Whether ``content`` is a seal this emulator made, unchanged (any text a
    client may send: a non-ASCII character is a change, not a crash)."""
    payload, _, mac = content.rpartition(".")
    given = mac.encode("utf-8", "surrogatepass")
    if not payload or not hmac.compare_digest(given, _mac(payload)):
        return False
    try:
        decode(base64.urlsafe_b64decode(payload.encode("ascii")))
    except (ValueError, binascii.Error):
        return False
    return True


def _short(content: str) -> str:
    return content if len(content) <= 8 else f"{content[:4]}...{content[-4:]}"


def input_items(value: Any) -> list[Any]:
    """The input as a list of items: a string is one user message."""
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    return list(value) if isinstance(value, list) else []


def _item_ids(items: Sequence[Any]) -> Counter[str]:
    return Counter(
        i["id"] for i in items if isinstance(i, Mapping) and isinstance(i.get("id"), str)
    )


class ResponseMemory:
    """Stored responses: id -> the whole context (input then output items),
    the newest ``limit`` of them, with a count of the item ids they hold (so
    an item sent back by id is found in one lookup)."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._kept: OrderedDict[str, tuple[Any, ...]] = OrderedDict()
        self._ids: Counter[str] = Counter()

    def context(self, response_id: str) -> tuple[Any, ...] | None:
        return self._kept.get(response_id)

    def keep(self, response_id: str, items: Sequence[Any]) -> None:
        self._forget(self._kept.pop(response_id, ()))
        self._kept[response_id] = tuple(items)
        self._ids.update(_item_ids(items))
        while len(self._kept) > self._limit:
            self._forget(self._kept.popitem(last=False)[1])

    def _forget(self, items: Sequence[Any]) -> None:
        for key, count in _item_ids(items).items():
            left = self._ids[key] - count
            if left > 0:
                self._ids[key] = left
            else:
                del self._ids[key]

    def holds_item(self, item_id: str) -> bool:
        return self._ids[item_id] > 0

    def clear(self) -> None:
        self._kept.clear()
        self._ids.clear()


def earlier_items(body: Mapping[str, Any], memory: ResponseMemory) -> tuple[Any, ...] | Refused:
    """The context ``previous_response_id`` names (empty without one)."""
    previous = body.get("previous_response_id")
    if previous is None:
        return ()
    found = memory.context(previous) if isinstance(previous, str) else None
    if found is None:
        message = _NO_PREVIOUS.format(id=previous)
        return Refused(400, message, "previous_response_id", "previous_response_not_found")
    return found


def _check_format(body: Mapping[str, Any]) -> Refused | None:
    text = body.get("text")
    fmt = text.get("format") if isinstance(text, Mapping) else None
    if not isinstance(fmt, Mapping) or fmt.get("type") != "json_schema":
        return None
    for field in ("name", "schema"):
        if field not in fmt:
            param = f"text.format.{field}"
            return Refused(400, _MISSING.format(param=param), param, "missing_required_parameter")
    return None


def _check_reasoning(item: Mapping[str, Any], memory: ResponseMemory) -> Refused | None:
    content = item.get("encrypted_content")
    if isinstance(content, str):
        if not _verified(content):
            message = _UNVERIFIED.format(short=_short(content))
            return Refused(400, message, None, "invalid_encrypted_content")
        return None
    item_id = item.get("id")
    if isinstance(item_id, str) and not memory.holds_item(item_id):
        return Refused(404, _NOT_PERSISTED.format(id=item_id), "input")
    return None


def check_input(
    body: Mapping[str, Any], earlier: Sequence[Any], memory: ResponseMemory
) -> Refused | None:
    """Tool items pair up across the whole context, reasoning comes back intact."""
    if not isinstance(body.get("model"), str):
        return Refused(400, _MISSING.format(param="model"), "model", "missing_required_parameter")
    raw = body.get("input")
    if raw is not None and not isinstance(raw, (str, list)):
        return Refused(400, "Invalid type for 'input': expected a string or an array.", "input")
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        return Refused(400, "Invalid type for 'tools': expected an array.", "tools")
    own = input_items(raw)
    if not all(isinstance(item, Mapping) for item in own):
        return Refused(400, "Invalid type for 'input': each item must be an object.", "input")
    calls: list[str] = []
    answered: set[str] = set()
    for item in (*earlier, *own):
        kind = item.get("type")
        if kind == "reasoning":
            problem = _check_reasoning(item, memory)
            if problem is not None:
                return problem
        elif kind == "function_call":
            calls.append(str(item.get("call_id")))
        elif kind == "function_call_output":
            call_id = str(item.get("call_id"))
            if call_id not in calls:
                return Refused(400, _NO_CALL.format(id=call_id), "input")
            answered.add(call_id)
    for call_id in calls:
        if call_id not in answered:
            return Refused(400, _NO_OUTPUT.format(id=call_id), "input")
    return _check_format(body)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return "".join(
        p["text"] for p in parts if isinstance(p, Mapping) and isinstance(p.get("text"), str)
    )


def summarize_items(items: Sequence[Any]) -> Conversation:
    """The last user text, and the sizes of the trailing function call outputs."""
    sizes: list[int] = []
    for item in reversed(items):
        if not (isinstance(item, Mapping) and item.get("type") == "function_call_output"):
            break
        sizes.append(len(_text(item.get("output"))))
    user = next(
        (i for i in reversed(items) if isinstance(i, Mapping) and i.get("role") == "user"), None
    )
    text = _text(user.get("content")) if user is not None else ""
    return Conversation(text, tuple(reversed(sizes)))
