"""Streamed answers for tests that echo a key across frames: OpenAI chat-completions
SSE frames, and a text cut into pieces whose cuts fall inside one part of it."""

from __future__ import annotations

import itertools
from typing import Any

import orjson

__all__ = ["openai_frame", "split_inside"]


def openai_frame(delta: dict[str, Any], finish: str | None = None) -> bytes:
    """One ``data:`` frame of a chat-completions stream with ``delta`` as its choice."""
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return b"data: " + orjson.dumps({"choices": [choice]}) + b"\n\n"


def split_inside(text: str, inner: str, parts: int) -> list[str]:
    """``text`` cut into ``parts`` pieces, each cut inside ``inner`` (a key's form)."""
    start = text.index(inner)
    cuts = [start + len(inner) * k // parts for k in range(1, parts)]
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]
