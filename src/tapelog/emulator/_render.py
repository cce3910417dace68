"""Request bodies -> cache segments, and the few facts the default policy reads.

A provider caches the *rendered token sequence*, not the JSON (PROVIDERS.md,
"What a prompt cache matches"). The emulator stands in for a chat template by
giving every segment an identity that ignores what a template would ignore —
the order of envelope keys, ``content: null`` versus an absent ``content``,
Anthropic ``cache_control`` markers, a string versus a one-text-block content —
and keeps byte-exact everything a template copies verbatim: text, tool-call
``arguments`` strings, tool schemas (key order included), signatures.

The token estimate is deliberately simple and documented (docs/emulator.md):
``ceil(len(canonical JSON bytes of the segment) / 4)``, where the segment is the
message (OpenAI wire) or the block (Anthropic wire) as sent, minus
``cache_control``. Real tokenizers differ; what matters for tests is that the
estimate is deterministic and that a byte change changes the identity.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tapelog.emulator._cache import SegmentSource
from tapelog.log import encode

__all__ = [
    "Conversation",
    "anthropic_block_source",
    "anthropic_sources",
    "count_cache_controls",
    "estimate_bytes",
    "estimate_text",
    "openai_message_source",
    "openai_sources",
    "summarize_anthropic",
    "summarize_openai",
]

# Values under these keys are copied verbatim by a chat template: key order inside
# a tool schema or a tool input is part of the rendered tokens.
_OPAQUE = frozenset({"parameters", "input_schema", "input"})


def estimate_bytes(data: bytes) -> int:
    """The documented token estimate: one token per started 4 bytes."""
    return (len(data) + 3) // 4


def estimate_text(text: str) -> int:
    return estimate_bytes(text.encode("utf-8"))


def _envelope(value: Any, *, drop: frozenset[str] = frozenset()) -> Any:
    """Sort envelope keys (a template ignores their order), keep opaque values as sent."""
    if isinstance(value, Mapping):
        return {
            k: value[k] if k in _OPAQUE else _envelope(value[k], drop=drop)
            for k in sorted(value)
            if k not in drop
        }
    if isinstance(value, list):
        return [_envelope(v, drop=drop) for v in value]
    return value


def _without(value: Any, key: str) -> Any:
    if isinstance(value, Mapping) and key in value:
        return {k: v for k, v in value.items() if k != key}
    return value


# --- OpenAI-compatible chat completions -------------------------------------------


def openai_message_source(message: Any) -> SegmentSource:
    """One message as a segment; empty fields (``null``, ``""``, ``[]``) count as absent."""
    if isinstance(message, Mapping):
        kept = {k: v for k, v in message.items() if k == "role" or v not in (None, "", [])}
        identity = encode({"message": _envelope(kept)})
    else:
        identity = encode({"message": message})
    return SegmentSource(identity, estimate_bytes(encode(message)))


def openai_sources(body: Mapping[str, Any]) -> list[SegmentSource]:
    """The tools array as one segment (if any), then each message."""
    sources: list[SegmentSource] = []
    tools = body.get("tools")
    if tools:
        sources.append(
            SegmentSource(encode({"tools": _envelope(tools)}), estimate_bytes(encode(tools)))
        )
    sources.extend(openai_message_source(m) for m in body.get("messages", ()))
    return sources


# --- Anthropic Messages -----------------------------------------------------------


def _blocks(content: Any) -> list[Any]:
    """A string content is one text block, as the API treats it."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return list(content)
    return []


def _marked(block: Any) -> bool:
    return isinstance(block, Mapping) and block.get("cache_control") is not None


def _block_source(kind: str, block: Any, extra: Mapping[str, Any]) -> SegmentSource:
    bare = _without(block, "cache_control")
    identity = encode({kind: _envelope(bare, drop=frozenset({"cache_control"})), **extra})
    return SegmentSource(identity, estimate_bytes(encode(bare)), _marked(block))


def anthropic_block_source(block: Any, *, role: Any, opens: bool) -> SegmentSource:
    """One content block of a message as :func:`anthropic_sources` renders it.

    Public so the cache audit can render a conversation block by block as it
    grows, with the same identities the emulator computes from the body.
    """
    return _block_source("block", block, {"role": role, "opens": opens})


def anthropic_sources(body: Mapping[str, Any]) -> list[SegmentSource]:
    """Each tool, each system block, then each content block of each message.

    The block identity carries its role and whether it opens a message, so the
    same text in a new turn is not the same segment. A top-level
    ``cache_control`` puts one breakpoint on the last block.
    """
    sources: list[SegmentSource] = []
    for tool in body.get("tools") or ():
        sources.append(_block_source("tool", tool, {}))
    for block in _blocks(body.get("system")):
        sources.append(_block_source("system", block, {}))
    for message in body.get("messages", ()):
        role = message.get("role") if isinstance(message, Mapping) else None
        content = message.get("content") if isinstance(message, Mapping) else None
        for i, block in enumerate(_blocks(content)):
            sources.append(anthropic_block_source(block, role=role, opens=i == 0))
    if body.get("cache_control") is not None and sources:
        last = sources[-1]
        sources[-1] = SegmentSource(last.identity, last.tokens, True)
    return sources


def count_cache_controls(body: Mapping[str, Any]) -> int:
    """How many breakpoints the request asks for (the API allows at most 4)."""
    count = 1 if body.get("cache_control") is not None else 0
    count += sum(1 for t in body.get("tools") or () if _marked(t))
    count += sum(1 for b in _blocks(body.get("system")) if _marked(b))
    for message in body.get("messages", ()):
        if isinstance(message, Mapping):
            count += sum(1 for b in _blocks(message.get("content")) if _marked(b))
    return count


# --- What the default policy needs ------------------------------------------------


@dataclass(frozen=True, slots=True)
class Conversation:
    """The last user text, and the sizes of trailing tool results (empty if none)."""

    last_user_text: str
    tool_result_sizes: tuple[int, ...]


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in _blocks(content):
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
        blocks = [b for b in _blocks(message.get("content")) if isinstance(b, Mapping)]
        results = [b for b in blocks if b.get("type") == "tool_result"]
        if message is messages[-1] and results:
            sizes = tuple(len(_text_of(b.get("content"))) for b in results)
        text = "".join(b["text"] for b in blocks if isinstance(b.get("text"), str))
        if text or not results:
            break
    return Conversation(text, sizes)
