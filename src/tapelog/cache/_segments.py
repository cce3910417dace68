"""Request bodies -> cache segments: what a provider's prompt cache sees.

A provider caches the *rendered token sequence*, not the JSON (docs/providers.md,
"What a prompt cache matches"). The emulator stands in for a chat template by
giving every segment an identity that ignores what a template would ignore —
the order of envelope keys, ``content: null`` versus an absent ``content``,
Anthropic ``cache_control`` markers, a string versus a one-text-block content —
and keeps byte-exact everything a template copies verbatim: text, tool-call
``arguments`` strings, tool schemas (key order included), signatures.

The emulator renders the bodies it receives with these functions and the cache
audit renders rebuilt requests with them, so the two cannot disagree. Their
input is lossless JSON already (decoded bodies, frozen log data), so it is
encoded without validating it again. The token
estimate is deliberately simple and documented (docs/emulator.md):
``ceil(len(canonical JSON bytes of the segment) / 4)``, where the segment is the
message (OpenAI wire), the input item (Responses wire) or the block (Anthropic
wire) as sent, minus
``cache_control``. Real tokenizers differ; what matters for tests is that the
estimate is deterministic and that a byte change changes the identity.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from orjson import Fragment

from tapelog.cache._rules import SegmentSource
from tapelog.log._api import encode_sorted_trusted
from tapelog.log._api import encode_trusted as encode

__all__ = [
    "anthropic_block_source",
    "anthropic_marker_ttls",
    "anthropic_sources",
    "blocks_of",
    "count_cache_controls",
    "estimate_bytes",
    "estimate_text",
    "openai_message_source",
    "openai_reply_sources",
    "openai_sources",
    "prefix_root",
    "responses_item_source",
    "responses_scope_source",
    "responses_sources",
]

# Values under these keys are copied verbatim by a chat template: key order inside
# a tool schema or a tool input is part of the rendered tokens.
_OPAQUE = frozenset({"parameters", "input_schema", "input"})


def prefix_root(rule: str, model: str, cache_key: Any = None) -> str:
    """The root every prefix key of a request chains from: the cache rule and
    the model, and, under OpenAI's rule, the request's ``prompt_cache_key``
    (OpenAI routes a request by its key with its prefix: a prefix cached under
    one key is not read under another, docs/providers.md)."""
    root = f"{rule}:{model}"
    if rule == "openai" and isinstance(cache_key, str):
        root += f":{cache_key}"
    return root


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


def _key_marker(keys: frozenset[str]) -> re.Pattern[bytes]:
    """Where one of ``keys`` shows as an object key (``"k":``) in encoded JSON."""
    return re.compile(b'"(?:' + b"|".join(re.escape(k.encode()) for k in sorted(keys)) + b')":')


_OPAQUE_MARK = _key_marker(_OPAQUE)
_DROP_MARKS = frozenset({"cache_control"})
_OPAQUE_OR_DROPPED_MARK = _key_marker(_OPAQUE | _DROP_MARKS)


def _sorted_identity(value: Any, plain: bytes, *, drop: frozenset[str] = frozenset()) -> bytes:
    """``encode(_envelope(value, drop=drop))``, in C when it can be.

    ``plain`` is ``value``'s own encoding. When no opaque or dropped key occurs
    in it (a key ``k`` shows as ``"k":``; a string that merely contains those
    bytes only sends it the slow way), sorting every object's keys is the whole
    envelope; otherwise the Python walk keeps opaque values as sent.
    """
    if not drop:
        marker = _OPAQUE_MARK
    elif drop == _DROP_MARKS:
        marker = _OPAQUE_OR_DROPPED_MARK
    else:
        marker = _key_marker(_OPAQUE | drop)
    if marker.search(plain):
        return encode(_envelope(value, drop=drop))
    return encode_sorted_trusted(value)


def _without(value: Any, key: str) -> Any:
    if isinstance(value, Mapping) and key in value:
        return {k: v for k, v in value.items() if k != key}
    return value


# --- OpenAI-compatible chat completions -------------------------------------------


_EMPTY: tuple[Any, ...] = (None, "", [])


def openai_message_source(message: Any, plain: bytes | None = None) -> SegmentSource:
    """One message as a segment; empty fields (``null``, ``""``, ``[]``) count as absent.

    ``plain``: ``message``'s own encoding, when the caller has it (the audit
    keeps it as the message's wire piece). The identity is
    ``encode({"message": <sorted envelope>})``, written as its bytes (compact
    JSON composes): one segment per history message of every request an
    audit renders, so each call counts."""
    if plain is None:
        plain = encode(message)
    if isinstance(message, Mapping):
        kept = {k: v for k, v in message.items() if k == "role" or v not in _EMPTY}
        identity = b'{"message":' + _sorted_identity(kept, plain) + b"}"
    else:
        identity = encode({"message": message})
    return SegmentSource(identity, estimate_bytes(plain))


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


# --- OpenAI Responses ---------------------------------------------------------------


def responses_scope_source(key: Any) -> list[SegmentSource]:
    """The ``prompt_cache_key`` as a first segment of no tokens, when there is one.

    OpenAI routes a request by its prefix *and* its ``prompt_cache_key``, so two
    requests with the same prefix and different keys do not share a cache
    entry: every later segment's chain key depends on this one.
    """
    if not isinstance(key, str) or not key:
        return []
    return [SegmentSource(encode({"prompt_cache_key": key}), 0)]


def responses_item_source(item: Any) -> SegmentSource:
    """One input item as a segment (envelope key order ignored, as for a message)."""
    return openai_message_source(item)


def responses_sources(body: Mapping[str, Any]) -> list[SegmentSource]:
    """The cache scope, the tools array (if any), the instructions (if any), then
    each input item (a string ``input`` is one user message)."""
    sources = responses_scope_source(body.get("prompt_cache_key"))
    tools = body.get("tools")
    if tools:
        sources.append(
            SegmentSource(encode({"tools": _envelope(tools)}), estimate_bytes(encode(tools)))
        )
    instructions = body.get("instructions")
    if isinstance(instructions, str) and instructions:
        identity = encode({"instructions": instructions})
        sources.append(SegmentSource(identity, estimate_bytes(encode(instructions))))
    items = body.get("input", ())
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    sources.extend(responses_item_source(item) for item in items)
    return sources


# --- Anthropic Messages -----------------------------------------------------------


def blocks_of(content: Any) -> list[Any]:
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
    plain = encode(bare)
    envelope = Fragment(_sorted_identity(bare, plain, drop=_DROP_MARKS))
    return SegmentSource(encode({kind: envelope, **extra}), estimate_bytes(plain), _marked(block))


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
    for block in blocks_of(body.get("system")):
        sources.append(_block_source("system", block, {}))
    for message in body.get("messages", ()):
        role = message.get("role") if isinstance(message, Mapping) else None
        content = message.get("content") if isinstance(message, Mapping) else None
        for i, block in enumerate(blocks_of(content)):
            sources.append(anthropic_block_source(block, role=role, opens=i == 0))
    if body.get("cache_control") is not None and sources:
        last = sources[-1]
        sources[-1] = SegmentSource(last.identity, last.tokens, True)
    return sources


def anthropic_marker_ttls(body: Mapping[str, Any]) -> list[str | None]:
    """The TTL of each breakpoint of :func:`anthropic_sources`, in its order:
    ``"5m"`` (the default) or ``"1h"`` for a marked block, ``None`` for the others."""

    def ttl(block: Any) -> str | None:
        if not _marked(block):
            return None
        control = block["cache_control"]
        return "1h" if isinstance(control, Mapping) and control.get("ttl") == "1h" else "5m"

    ttls = [ttl(t) for t in body.get("tools") or ()]
    ttls.extend(ttl(b) for b in blocks_of(body.get("system")))
    for message in body.get("messages", ()):
        content = message.get("content") if isinstance(message, Mapping) else None
        ttls.extend(ttl(b) for b in blocks_of(content))
    if body.get("cache_control") is not None and ttls:
        ttls[-1] = ttl({"cache_control": body["cache_control"]})
    return ttls


def count_cache_controls(body: Mapping[str, Any]) -> int:
    """How many breakpoints the request asks for (the API allows at most 4)."""
    count = 1 if body.get("cache_control") is not None else 0
    count += sum(1 for t in body.get("tools") or () if _marked(t))
    count += sum(1 for b in blocks_of(body.get("system")) if _marked(b))
    for message in body.get("messages", ()):
        if isinstance(message, Mapping):
            count += sum(1 for b in blocks_of(message.get("content")) if _marked(b))
    return count


# --- What a DeepSeek-style cache stores after a reply ------------------------------


def openai_reply_message(
    text: str,
    reasoning: str,
    tool_calls: Sequence[tuple[str | None, str, str]],
    *,
    with_reasoning: bool,
) -> dict[str, Any]:
    """An answer as an OpenAI-compatible assistant message (``tool_calls`` are
    ``(id, name, arguments)``): the non-streamed answer, and what a client sends back."""
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if with_reasoning and reasoning:
        message["reasoning_content"] = reasoning
    if tool_calls:
        message["tool_calls"] = [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}}
            for cid, name, arguments in tool_calls
        ]
    return message


def openai_reply_sources(
    text: str, reasoning: str, tool_calls: Sequence[tuple[str | None, str, str]]
) -> list[SegmentSource]:
    """The reply as a client would send it back, with and without reasoning.

    Whether reasoning goes back is a per-model client setting, so a DeepSeek
    store keeps both renderings (as output prefixes chained after the prompt).
    """
    variants = [openai_reply_message(text, reasoning, tool_calls, with_reasoning=True)]
    if reasoning:
        variants.append(openai_reply_message(text, reasoning, tool_calls, with_reasoning=False))
    return [openai_message_source(m) for m in variants]
