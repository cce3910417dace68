"""An OpenAI Responses API request body -> the log's terms (``POST /v1/responses``).

Carry, never reshape: every input item reaches the upstream as the client
sent it (the parsed upstream body equals the client's, but for ``stream``,
which is the proxy's own; a string ``input`` is one user message, sent as the
string again by the logged wire option ``input_string``). An item becomes a
neutral block the log understands when the responses wire (``tapelog.llm``)
sends exactly that item back from it; any other item is kept whole as an
opaque ``item`` block, sent as given. So:

* consecutive output items (``reasoning``, ``function_call``, an ``assistant``
  ``message``, any ``*_call``) are one assistant message: a reasoning item with
  its ``summary`` a reasoning block (``id``, ``encrypted_content`` ... kept),
  a bare ``function_call`` (``type``, ``call_id``, ``name``, ``arguments``) a
  tool call, a bare assistant message one text block, anything else (an item
  with its own ``id`` or ``status``) an ``item`` block;
* a bare ``function_call_output`` whose call is a tool call in the log is a
  tool result; else it is an ``item`` in a user message (so the log never holds
  a result without its call);
* a bare ``user`` message of text parts is a user message; any other input
  item (a ``developer`` message, an item with an ``id``) an ``item`` in a user
  message.

``instructions`` (a string) is the system prompt; function tools with a name
are header tools as given, a built-in tool (no name) is ``{"name":
"builtin:<type>", "builtin": tool}``; ``max_output_tokens``, ``temperature``
and ``top_p`` are config fields; every other field (``store``, ``include``,
``reasoning``, ``previous_response_id``, ``prompt_cache_key``,
``client_metadata`` ...) is an extra, as given. The header's
``config.wire.store_false = false`` keeps the client's ``store`` (absent stays
absent).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from tapelog._errors import EventError, JsonValueError, ProxyError
from tapelog.llm._api import ResponsesWire
from tapelog.log._api import FrozenDict, freeze
from tapelog.proxy._keys import loose_key
from tapelog.proxy._types import EVERY_RULE, ClientRequest, Translated

__all__ = [
    "Grouped",
    "continuing",
    "group_items",
    "grow_groups",
    "parse_responses",
    "responses_top",
    "translate_responses",
]

_OWN: Final = frozenset({"stream"})
_MAPPED: Final = frozenset(
    {"model", "input", "instructions", "tools", "max_output_tokens", "temperature", "top_p"}
)
_OPTIONS: Final = (
    ("max_output_tokens", "max_tokens"),
    ("temperature", "temperature"),
    ("top_p", "top_p"),
)
_WIRE = ResponsesWire()


def _refuse(message: str) -> ProxyError:
    return ProxyError(message, kind="invalid_request_error")


def _kind(item: Mapping[str, Any]) -> str:
    kind = item.get("type", "message")
    return kind if isinstance(kind, str) else ""


def _is_output(item: Mapping[str, Any]) -> bool:
    kind = _kind(item)
    if kind == "message":
        return item.get("role") == "assistant"
    return kind == "reasoning" or kind.endswith("_call")


def _bare_call(item: Mapping[str, Any]) -> bool:
    return (
        _kind(item) == "function_call"
        and set(item) == {"type", "call_id", "name", "arguments"}
        and all(isinstance(item[k], str) for k in ("call_id", "name", "arguments"))
    )


def input_list(body: Mapping[str, Any]) -> list[Any]:
    """The input as items (a string is its one user message item)."""
    value = body.get("input")
    if isinstance(value, str):
        return [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": value}]}
        ]
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(i, dict) for i in value):
        raise _refuse("input must be a string or a list of item objects")
    return value


@dataclass(frozen=True, slots=True)
class Grouped:
    """The first ``items`` input items of a body as groups (:func:`group_items`),
    with what grouping more items after them must know: the ids of their bare
    function calls (``calls``), the call ids of their function call outputs
    that are not tool results (``loose``: their call is not in the input), and
    whether the last group is a run of output items (``open_run``: a next
    output item joins it). ``grown``: these groups were made from an earlier
    body's by grouping only the new items (:func:`grow_groups`)."""

    groups: list[dict[str, Any]]
    items: int
    calls: frozenset[str]
    loose: frozenset[str]
    open_run: bool
    grown: bool = False


def group_items(
    items: Sequence[Any], *, start: int = 0, calls: frozenset[str] | None = None
) -> list[dict[str, Any]]:
    """The items as the proxy's client messages: runs of output items are one
    ``assistant`` group, a function call output a ``tool`` group (``natural``:
    its call is a tool call in the log), any other item a ``user`` group.
    ``items`` are the input's items from ``start`` on (the groups' ``at`` and
    ``end`` count from the input's first), and ``calls`` the ids of every bare
    function call of the input (default: those among ``items``)."""
    if calls is None:
        calls = frozenset(i["call_id"] for i in items if _bare_call(i))
    groups: list[dict[str, Any]] = []
    for at, item in enumerate(items, start):
        if _is_output(item):
            last = groups[-1] if groups else None
            if last is not None and last["role"] == "assistant" and last["end"] == at:
                last["items"].append(item)
                last["end"] = at + 1
            else:
                groups.append({"role": "assistant", "at": at, "end": at + 1, "items": [item]})
        elif _kind(item) == "function_call_output":
            natural = item.get("call_id") in calls
            groups.append(
                {"role": "tool", "at": at, "end": at + 1, "items": [item], "natural": natural}
            )
        else:
            groups.append({"role": "user", "at": at, "end": at + 1, "items": [item]})
    return groups


def _grouped(groups: list[dict[str, Any]]) -> tuple[frozenset[str], bool]:
    """``loose`` and ``open_run`` of ``groups`` (:class:`Grouped`): the call
    ids of its tool groups that are not natural, and whether it ends with an
    output run."""
    loose = frozenset(
        str(g["items"][0].get("call_id"))
        for g in groups
        if g["role"] == "tool" and not g["natural"]
    )
    return loose, bool(groups) and groups[-1]["role"] == "assistant"


def grow_groups(items: Sequence[Any], known: Grouped | None) -> Grouped:
    """The groups of ``items``. When ``known`` grouped their first
    ``known.items`` items (the same objects: an extension of its body,
    ``_body_prefix``), only the items after those are grouped, unless that
    could change a known group: a first new item that is an output item
    joining a known run, or a new bare function call whose id a known
    function call output names (it would become a tool result). Then, as
    without ``known``, every item is grouped."""
    if known is not None and 0 < known.items <= len(items):
        new = items[known.items :]
        added = frozenset(i["call_id"] for i in new if _bare_call(i))
        joins = known.open_run and bool(new) and _is_output(new[0])
        if not joins and not added & known.loose:
            calls = known.calls | added
            more = group_items(new, start=known.items, calls=calls)
            loose, open_run = _grouped(more)
            if not more:
                open_run = known.open_run
            groups = [*known.groups, *more]
            return Grouped(groups, len(items), calls, known.loose | loose, open_run, grown=True)
    calls = frozenset(i["call_id"] for i in items if _bare_call(i))
    groups = group_items(items, calls=calls)
    loose, open_run = _grouped(groups)
    return Grouped(groups, len(items), calls, loose, open_run)


def _tools(tools: Any) -> tuple[FrozenDict, ...]:
    if tools is None:
        return ()
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        raise _refuse("tools must be a list of tool objects")
    out: list[FrozenDict] = []
    names: set[str] = set()
    for i, tool in enumerate(tools):
        name = tool.get("name")
        if isinstance(name, str) and name:
            shaped: dict[str, Any] = tool
        else:
            name = f"builtin:{tool.get('type')}"
            if name in names:
                name = f"{name}:{i}"
            shaped = {"name": name, "builtin": tool}
        names.add(str(name))
        out.append(freeze(shaped, path=f"tools[{i}]"))
    return tuple(out)


def parse_responses(body: Mapping[str, Any], known: Grouped | None = None) -> ClientRequest:
    """The header part and the items (as groups) of a Responses body; ``known``:
    the grouping of an earlier body this one extends (:func:`grow_groups`)."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _refuse("model must be a non-empty string")
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise _refuse("instructions must be a string (the log's system prompt is one text)")
    options = {name: body[key] for key, name in _OPTIONS if body.get(key) is not None}
    extras = {k: v for k, v in body.items() if k not in _MAPPED and k not in _OWN}
    try:
        tools = _tools(body.get("tools"))
    except JsonValueError as exc:
        raise _refuse(str(exc)) from None
    grouped = grow_groups(input_list(body), known)
    return ClientRequest(
        family="responses",
        model=model,
        system=instructions or None,
        tools=tools,
        options=options,
        extras=extras,
        messages=grouped.groups,
        grouped=grouped,
        offset=0,
        stream=body.get("stream") is True,
        body=body,
    )


def _item_block(item: Any) -> dict[str, Any]:
    return {"type": "item", "item": item}


def _assistant_block(item: Mapping[str, Any]) -> dict[str, Any]:
    kind = _kind(item)
    if kind == "reasoning" and isinstance(item.get("summary"), list) and "text" not in item:
        text = "\n\n".join(
            p["text"]
            for p in item["summary"]
            if isinstance(p, Mapping) and isinstance(p.get("text"), str)
        )
        return {"type": "reasoning", "text": text, **{k: v for k, v in item.items() if k != "type"}}
    if _bare_call(item):
        return {
            "type": "tool_call",
            "id": item["call_id"],
            "name": item["name"],
            "arguments": item["arguments"],
        }
    content = item.get("content")
    if (
        kind == "message"
        and set(item) == {"type", "role", "content"}
        and isinstance(content, list)
        and len(content) == 1
        and isinstance(content[0], Mapping)
        and set(content[0]) == {"type", "text"}
        and content[0]["type"] == "output_text"
        and isinstance(content[0]["text"], str)
    ):
        return {"type": "text", "text": content[0]["text"]}
    return _item_block(item)


def _natural(group: Mapping[str, Any]) -> dict[str, Any]:
    items = group["items"]
    role = group["role"]
    if role == "assistant":
        return {"role": "assistant", "content": [_assistant_block(i) for i in items]}
    item = items[0]
    if role == "tool" and group.get("natural") and set(item) == {"type", "call_id", "output"}:
        output = item["output"]
        if isinstance(output, str):
            block = {
                "type": "tool_result",
                "tool_call_id": item["call_id"],
                "content": output,
                "is_error": False,
            }
            return {"role": "tool", "content": [block]}
    content = item.get("content")
    if (
        role == "user"
        and set(item) == {"type", "role", "content"}
        and item["type"] == "message"
        and item["role"] == "user"
        and isinstance(content, list)
        and content
        and all(
            isinstance(p, Mapping) and set(p) == {"type", "text"} and p["type"] == "input_text"
            for p in content
        )
    ):
        return {"role": "user", "content": [{"type": "text", "text": p["text"]} for p in content]}
    return {"role": "user", "content": [_item_block(i) for i in items]}


def translate_responses(group: Any, where: str) -> Translated:
    """One group of client items in the log's terms, checked: the responses wire
    sends exactly these items back from it (else they are kept as ``item`` blocks)."""
    if not isinstance(group, Mapping) or not isinstance(group.get("items"), list):
        raise _refuse(f"{where} must be an item object")
    items = group["items"]
    place = f"input[{group.get('at', 0)}]"
    candidates = [_natural(group)]
    if group["role"] != "user" or candidates[0]["content"][0]["type"] != "item":
        opaque = "assistant" if group["role"] == "assistant" else "user"
        candidates.append({"role": opaque, "content": [_item_block(i) for i in items]})
    for candidate in candidates:
        try:
            neutral: FrozenDict = freeze(candidate, path=place)
            if list(_WIRE.items(neutral, where=place)) == items:
                return Translated(messages=(neutral,), keys=(loose_key(neutral),), rules=EVERY_RULE)
        except (EventError, JsonValueError):
            continue
    raise _refuse(f"{place} cannot be represented in the log")


def responses_top(body: Mapping[str, Any]) -> dict[str, Any]:
    """Everything but the input and ``stream`` (the proxy's own), as parsed."""
    return {k: v for k, v in body.items() if k not in ("input", "stream")}


def continuing(request: ClientRequest, history: Sequence[Mapping[str, Any]]) -> ClientRequest:
    """A request that continues a session's last logged response by
    ``previous_response_id``, in that session's terms: the provider holds the
    ``history`` (``config.wire.held``: the wire sends only the request's own
    items after it), and a function call output that answers a call of the
    history's last answer is a tool result (its call is in the log)."""
    last = history[-1] if history else None
    calls: set[Any] = set()
    if last is not None and last["role"] == "assistant":
        calls = {b["id"] for b in last["content"] if b["type"] == "tool_call"}
    groups = [
        {**g, "natural": True}
        if g["role"] == "tool" and g["items"][0].get("call_id") in calls
        else g
        for g in request.messages
    ]
    return replace(request, messages=groups, wire={**request.wire, "held": len(history)})
