"""What a turn is made of: its result, its retry policy, and how a step's finish ends it.

Plain values the loop (:mod:`tapelog.agent._loop`) builds turns from.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from tapelog.agent._retry import RetryPolicy  # backoff, jitter, Retry-After
from tapelog.log._api import FrozenDict, LlmCallConfig, Session

__all__ = [
    "Flushable",
    "Outcome",
    "RetryPolicy",
    "TurnResult",
    "checked_config",
    "final_text",
    "last_turn",
    "sum_usage",
    "turn_reason",
]


class Flushable(Protocol):
    def flush(self) -> None: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnResult:
    """How a turn ended, its final answer text and the usage summed over its steps.

    ``output`` is the validated answer of a structured turn (``Agent.run(...,
    output_type=...)``): an instance of the pydantic model, or the JSON value
    for a dict schema; ``None`` on a plain turn or when the turn did not complete.
    """

    turn: int
    reason: FrozenDict
    text: str
    steps: int
    usage: Mapping[str, int] = field(default_factory=dict)
    output: Any = None

    @property
    def ok(self) -> bool:
        return bool(self.reason["kind"] == "completed")


def sum_usage(total: dict[str, int], usage: Mapping[str, Any] | None) -> None:
    if not usage:
        return
    for key in ("input", "cache_read", "cache_write", "output", "reasoning"):
        total[key] = total.get(key, 0) + int(usage.get(key, 0))


def final_text(content: Sequence[Mapping[str, Any]]) -> str:
    return "".join(b["text"] for b in content if b["type"] == "text")


@dataclass(slots=True)
class Outcome:
    """What a turn has produced so far."""

    turn: int
    steps: int = 0
    text: str = ""
    usage: dict[str, int] = field(default_factory=dict)
    output: Any = None
    result: TurnResult | None = None  # set when its turn/end is logged (once)


def turn_reason(finish: str, calls: Sequence[Any]) -> Mapping[str, Any] | None:
    """How the turn ends after a step that finished with ``finish`` (``None``: go on)."""
    if finish == "max_tokens":
        return {"kind": "max_tokens"}
    if finish == "error":
        return {
            "kind": "error",
            "error": {"message": "the provider ended the response with an error"},
        }
    if not calls:
        return {"kind": "completed"}
    return None


def last_turn(session: Session) -> int:
    """The number of the last ``turn/start`` in the log (0 when there is none)."""
    events = session.events
    for seq in range(len(events) - 1, -1, -1):
        if events.type_at(seq) == "turn/start":  # by type: no event made on the way
            turn: int = events[seq].data["turn"]
            return turn
    return 0


def checked_config(config: Any) -> LlmCallConfig:
    if not isinstance(config, LlmCallConfig):
        raise TypeError(f"config must be an LlmCallConfig, got {type(config).__name__}")
    return config
