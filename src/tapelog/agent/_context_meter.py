"""How many tokens the next request would carry, at the cost of what is new.

Compaction triggers on a full context, and it is asked before every step: a
fresh estimate of the whole would-be body each time would make a step cost the
session's length. So the meter remembers the last reported usage (prompt plus
output tokens of the last answer) and adds an estimate of the messages logged
since. A replace (compaction, trimming) invalidates what was reported, and
then, or before any report, the whole body is estimated once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from tapelog.llm._api import estimate_tokens, usage_prompt_tokens
from tapelog.log import encode
from tapelog.log._api import Event, Session

__all__ = ["ContextMeter"]


class ContextMeter:
    """The last reported context size of one session, and what came after it."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: tuple[int, int, int] | None = None  # (tokens, generation, last seq)

    def remember(self, session: Session, message: Event) -> None:
        """Take the usage an ``assistant/message`` reports as the size so far."""
        used = message.data.get("usage")
        if used:
            tokens = usage_prompt_tokens(used) + int(used.get("output", 0))
            self._last = (tokens, session.replace_generation, message.seq)

    async def tokens(self, session: Session, whole: Callable[[], Awaitable[int]]) -> int:
        """The estimate: the last report plus the messages since (O(new)), else
        ``whole()``, an estimate of the entire would-be body."""
        last = self._last
        if last is None or last[1] != session.replace_generation:
            return await whole()
        tokens, _, seen = last
        nodes = session.history()
        for i in range(len(nodes) - 1, -1, -1):
            seq, message = nodes[i]
            if seq <= seen:
                break
            tokens += estimate_tokens(encode(message))
        return tokens
