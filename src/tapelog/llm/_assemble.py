"""Neutral chunks -> one assistant message (pure).

The chunks are what was logged as ``assistant/chunk`` events, so the message
the loop commits can always be re-derived from the log. Pieces of one block
are joined verbatim (tool-call ``arguments`` are concatenated, never parsed),
and blocks keep the order in which they first appeared in the stream.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tapelog.log._api import FrozenDict, FrozenList, freeze

__all__ = ["AssembledMessage", "assemble_alternatives", "assemble_message"]


@dataclass(frozen=True, slots=True, kw_only=True)
class AssembledMessage:
    """The message a stream produced.

    ``finish`` is the neutral reason of the ``finish`` chunk (``stop``,
    ``tool_calls``, ``max_tokens`` or ``error``), or ``interrupted`` when the
    stream ended without one; ``interrupted`` says the same as a flag.
    ``finish_raw`` is the provider's own reason. ``usage`` is the last usage
    chunk's normalised usage, if any arrived.
    """

    content: FrozenList
    usage: FrozenDict | None
    finish: str
    finish_raw: Any
    interrupted: bool


def _slot(slots: dict[tuple[str, Any], dict[str, Any]], key: tuple[str, Any]) -> dict[str, Any]:
    block = slots.get(key)
    if block is None:
        if key[0] == "tool":
            block = {"type": "tool_call", "id": "", "name": "", "arguments": ""}
        else:
            block = {"type": key[0], "text": ""}
        slots[key] = block
    return block


def assemble_message(chunks: Iterable[Mapping[str, Any]]) -> AssembledMessage:
    """Join streamed chunks into content blocks, usage and finish reason.

    Text and reasoning pieces with the same ``index`` (or none) form one
    block; tool-call pieces are joined by ``index``. Chunk kinds this function
    does not know (e.g. the loop's own ``error`` retry records) and the
    chunks of other choices (``"choice": k``) are skipped.
    A tool call that never got an id is given ``call_<n>`` (its position),
    so the message is still a pure function of the chunks.
    """
    slots: dict[tuple[str, Any], dict[str, Any]] = {}
    usage: FrozenDict | None = None
    finish: str | None = None
    finish_raw: Any = None
    for chunk in chunks:
        if "choice" in chunk:  # another choice of an n > 1 request
            continue
        kind = chunk.get("kind")
        index = chunk.get("index")
        if kind == "text":
            _slot(slots, ("text", index))["text"] += chunk["text"]
        elif kind == "reasoning":
            _slot(slots, ("reasoning", index))["text"] += chunk["text"]
        elif kind == "reasoning_signature":
            block = _slot(slots, ("reasoning", index))
            block["signature"] = block.get("signature", "") + chunk["signature"]
        elif kind == "reasoning_redacted":
            block = _slot(slots, ("reasoning", index))
            block["data"] = block.get("data", "") + chunk["data"]
        elif kind == "reasoning_item":
            # A Responses reasoning item's own fields (id, summary,
            # encrypted_content...), kept verbatim to be sent back as they came.
            block = _slot(slots, ("reasoning", index))
            block.update((k, v) for k, v in chunk["item"].items() if k not in ("type", "text"))
        elif kind == "item":
            slots[("item", index)] = {"type": "item", "item": chunk["item"]}
        elif kind == "tool_call":
            block = _slot(slots, ("tool", index))
            if chunk.get("id"):
                block["id"] = chunk["id"]
            if chunk.get("name"):
                block["name"] = chunk["name"]
            block["arguments"] += chunk.get("arguments", "")
        elif kind == "usage":
            usage = freeze(chunk["usage"])
        elif kind == "finish":
            finish = chunk["reason"]
            finish_raw = chunk.get("raw")
    content: list[dict[str, Any]] = []
    for n, block in enumerate(slots.values()):
        btype = block["type"]
        if btype == "text" and not block["text"]:
            continue
        if btype == "reasoning" and not block["text"] and block.keys() == {"type", "text"}:
            continue
        if btype == "tool_call" and not block["id"]:
            block["id"] = f"call_{n}"
        content.append(block)
    return AssembledMessage(
        content=freeze(content, path="content"),
        usage=usage,
        finish=finish if finish is not None else "interrupted",
        finish_raw=finish_raw,
        interrupted=finish is None,
    )


def assemble_alternatives(chunks: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The other choices of an ``n`` > 1 answer, each assembled like the answer:
    ``{"choice": k, "content": [...], "finish": reason}`` in choice order (an
    ``interrupted`` finish when its stream never finished it)."""
    by_choice: dict[int, list[Mapping[str, Any]]] = {}
    for chunk in chunks:
        number = chunk.get("choice")
        if isinstance(number, int):
            by_choice.setdefault(number, []).append(chunk)
    out: list[dict[str, Any]] = []
    for number in sorted(by_choice):
        assembled = assemble_message(
            {k: v for k, v in c.items() if k != "choice"} for c in by_choice[number]
        )
        alternative = {"choice": number, "content": assembled.content, "finish": assembled.finish}
        out.append(alternative)
    return out
