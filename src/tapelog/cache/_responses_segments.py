"""Responses API request bodies -> cache segments (the third wire, beside
chat completions and Anthropic Messages in ``_segments``).

OpenAI renders a Responses request as tools, then ``instructions``, then the
input items in order; its automatic prefix cache matches that rendering. As in
``_segments``, envelope key order does not change a segment's identity, while
everything a template copies verbatim (text, ``arguments``, tool schemas,
``encrypted_content``) does. A string ``input`` is one user message, as the
API treats it. The emulator renders the bodies it receives with these
functions, so a cache audit of the same wire can render rebuilt requests the
same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tapelog.cache._rules import SegmentSource
from tapelog.cache._segments import estimate_bytes, openai_message_source
from tapelog.log._api import encode_trusted as encode

__all__ = ["responses_cache_root", "responses_input_items", "responses_sources"]


def responses_input_items(input_value: Any) -> list[Any]:
    """The input as a list of items: a string is one user message."""
    if isinstance(input_value, str):
        return [{"role": "user", "content": input_value}]
    if isinstance(input_value, list):
        return list(input_value)
    return []


def responses_sources(
    body: Mapping[str, Any], *, earlier: Sequence[Any] = ()
) -> list[SegmentSource]:
    """Tools (one segment), ``instructions``, then ``earlier`` items (the context a
    ``previous_response_id`` names) and the body's own input items, one segment each."""
    sources: list[SegmentSource] = []
    tools = body.get("tools")
    if tools:
        sources.append(openai_message_source({"tools": tools}))
    instructions = body.get("instructions")
    if instructions not in (None, "", []):
        sources.append(
            SegmentSource(
                encode({"instructions": instructions}), estimate_bytes(encode(instructions))
            )
        )
    items = [*earlier, *responses_input_items(body.get("input"))]
    sources.extend(openai_message_source(item) for item in items)
    return sources


def responses_cache_root(rule: str, body: Mapping[str, Any]) -> str:
    """What scopes the cache: rule, model, and ``prompt_cache_key`` when sent
    (OpenAI routes requests by it, so two keys share no prefix)."""
    key = body.get("prompt_cache_key")
    scope = f"{rule}:responses:{body.get('model')}"
    return scope if not isinstance(key, str) else f"{scope}:key={key}"
