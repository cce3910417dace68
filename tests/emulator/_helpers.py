"""Message builders with exact byte sizes, so cache numbers can be computed by hand.

Every segment's token estimate is ceil(len(canonical JSON bytes) / 4); these
builders pad text so a message (OpenAI wire) or a block (Anthropic wire) has
exactly the byte length asked for, and check it.
"""

from __future__ import annotations

from typing import Any

from tapelog.log import encode

BASE = "http://emu"


def message(role: str, size: int, fill: str = "x") -> dict[str, Any]:
    """An OpenAI-wire message whose canonical JSON is exactly ``size`` bytes."""
    overhead = len(encode({"role": role, "content": ""}))
    out = {"role": role, "content": fill * (size - overhead)}
    assert len(encode(out)) == size
    return out


def block(size: int, fill: str = "x", *, cached: bool = False) -> dict[str, Any]:
    """An Anthropic text block of exactly ``size`` bytes (not counting cache_control)."""
    overhead = len(encode({"type": "text", "text": ""}))
    out: dict[str, Any] = {"type": "text", "text": fill * (size - overhead)}
    assert len(encode(out)) == size
    if cached:
        out["cache_control"] = {"type": "ephemeral"}
    return out
