"""Tool-result trimming: old, large tool results become head/tail excerpts.

A trim is a single-node surface ``replace`` of a ``tool/result`` by a
``tool/result`` with the same ``call_id`` whose content is an excerpt, so the
log keeps the full original and every request stays a function of the log.

Each trim changes an early message and so breaks the provider's prefix cache
from that point on. The policy therefore trims in batches: nothing happens
until the eligible results together would give back at least ``batch_chars``
characters, and then all of them are trimmed at once, between two steps. A
result is eligible once it is over ``max_chars`` and belongs to a turn that
ended at least ``min_age_turns`` turns ago (so the model always sees the
current turn's results in full).
"""

from __future__ import annotations

from dataclasses import dataclass

from tapelog.log._api import Event, Session

__all__ = ["TrimPolicy", "Trimmer", "excerpt"]

MARKER = "[... {n} characters trimmed ...]"


@dataclass(frozen=True, slots=True, kw_only=True)
class TrimPolicy:
    """When and how much to trim (characters of the result text)."""

    max_chars: int = 8_000
    head_chars: int = 2_000
    tail_chars: int = 1_000
    batch_chars: int = 16_000
    min_age_turns: int = 1
    enabled: bool = True

    def __post_init__(self) -> None:
        if self.head_chars + self.tail_chars >= self.max_chars:
            raise ValueError("TrimPolicy: head_chars + tail_chars must be below max_chars")


def excerpt(text: str, policy: TrimPolicy) -> str:
    """The head and tail of ``text`` around a marker naming how much was cut."""
    cut = len(text) - policy.head_chars - policy.tail_chars
    tail = text[len(text) - policy.tail_chars :] if policy.tail_chars else ""
    return f"{text[: policy.head_chars]}\n{MARKER.format(n=cut)}\n{tail}"


class Trimmer:
    """Applies a :class:`TrimPolicy` to one session, incrementally.

    It remembers where it stopped reading the log, so a check costs what was
    appended since the last one plus the (few) oversized results pending.
    """

    def __init__(self, policy: TrimPolicy) -> None:
        self.policy = policy
        self._read = 0
        self._ended_turns: list[int] = []
        self._candidates: dict[int, Event] = {}

    def _catch_up(self, session: Session) -> None:
        end = session.seq
        # By type first: only the events it keeps are read (a resumed log is long).
        for seq, etype in enumerate(session.events.types(self._read), self._read):
            if seq >= end:
                break
            if etype == "turn/end":
                self._ended_turns.append(session.event(seq).data["turn"])
            elif etype == "tool/result":
                event = session.event(seq)
                content = event.data["content"]
                if isinstance(content, str) and len(content) > self.policy.max_chars:
                    self._candidates[seq] = event
        self._read = end

    def eligible(self, session: Session) -> list[Event]:
        """Oversized results still on the surface and old enough, in log order."""
        self._catch_up(session)
        for seq in [s for s in self._candidates if not session.on_surface(s)]:
            del self._candidates[seq]
        age = self.policy.min_age_turns
        if age and len(self._ended_turns) < age:
            return []
        newest = self._ended_turns[-age] if age else None
        return [e for e in self._candidates.values() if newest is None or e.data["turn"] <= newest]

    def trim(self, session: Session) -> list[Event]:
        """Trim every eligible result if together they free ``batch_chars``."""
        policy = self.policy
        if not policy.enabled:
            return []
        eligible = self.eligible(session)
        kept = policy.head_chars + policy.tail_chars
        saved = sum(len(e.data["content"]) - kept for e in eligible)
        if not eligible or saved < policy.batch_chars:
            return []
        trims: list[Event] = []
        for old in eligible:
            data = dict(old.data)
            data["content"] = excerpt(old.data["content"], policy)
            trims.append(
                session.append(
                    "tool/result",
                    data,
                    surface_op={"op": "replace", "start": old.seq, "end": old.seq},
                    source_seqs=[old.seq],
                )
            )
        return trims
