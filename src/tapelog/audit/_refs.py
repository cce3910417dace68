"""The fields that name a request in every audit row."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["RequestRef"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestRef:
    """The fields that name a loop request in every audit row (cache report, diff).

    Both outputs lead with them, in this order, so one request reads the same
    in ``tapelog cache --json`` and ``tapelog diff --json`` (docs/cli.md).
    Build them with :func:`tapelog.request.request_fields`.
    """

    index: int
    turn: int | None
    step: int | None
    seq: int
    """The seq of the request's ``step/start``."""
    provider: str
    model: str

    def ref_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "turn": self.turn,
            "step": self.step,
            "seq": self.seq,
            "provider": self.provider,
            "model": self.model,
        }
