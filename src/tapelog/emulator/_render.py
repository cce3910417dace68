"""The few facts of a request body the emulator's default policy reads."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tapelog.cache._api import blocks_of

__all__ = ["Conversation", "summarize_anthropic", "summarize_openai"]


@dataclass(frozen=True, slots=True)
class Conversation:
    """The last user text, and the sizes of trailing tool results (empty if none)."""

    last_user_text: str
    tool_result_sizes: tuple[int, ...]


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in blocks_of(content):
        if isinstance(block, Mapping):
            if isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif block.get("type") == "tool_result":
                parts.append(_text_of(block.get("content")))
    return "".join(parts)


def summarize_openai(messages: Sequence[Any]) -> Conversation:
    sizes: list[int] = []
    for message in reversed(messages):
        if not (isinstance(message, Mapping) and message.get("role") == "tool"):
            break
        sizes.append(len(_text_of(message.get("content"))))
    user = next(
        (m for m in reversed(messages) if isinstance(m, Mapping) and m.get("role") == "user"),
        None,
    )
    text = _text_of(user.get("content")) if user is not None else ""
    return Conversation(text, tuple(reversed(sizes)))


def summarize_anthropic(messages: Sequence[Any]) -> Conversation:
    sizes: tuple[int, ...] = ()
    text = ""
    for message in reversed(messages):
        if not (isinstance(message, Mapping) and message.get("role") == "user"):
            continue
        blocks = [b for b in blocks_of(message.get("content")) if isinstance(b, Mapping)]
        results = [b for b in blocks if b.get("type") == "tool_result"]
        if message is messages[-1] and results:
            sizes = tuple(len(_text_of(b.get("content"))) for b in results)
        text = "".join(b["text"] for b in blocks if isinstance(b.get("text"), str))
        if text or not results:
            break
    return Conversation(text, sizes)
