"""A session written to a store as it grows, for the checkpoint-resume tests.

Turns of tool rounds and an answer, with what moves the cache audit's state:
low reported usage (the simulated cache is cleared as lost), idle gaps past a
provider's cache lifetime, a new loop instance's header (``resume``, another
system prompt), trims and compactions; on any wire (``header``).
:meth:`Growing.turn` can flush in the middle of a step (after its
``step/start`` and header, before its answer): a checkpoint then covers a log
whose last step is still open.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from audit._sessions import HEADER, USAGE, LogBuilder
from tapelog.log._api import Event, Session
from tapelog.store import JsonlStore, SessionStore

LOW_USAGE = {"input": 4000, "cache_read": 0, "cache_write": 0, "output": 5, "reasoning": 0}
IDLE_GAP_MS = 2 * 60 * 60 * 1000  # past every provider's idle lifetime


class AuditCounter:
    """Counts the requests the cache audit audits (a run from a checkpoint of the
    same log audits none; one resumed from a shorter log's, only those after it)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import tapelog.audit._cache_report as module

        self.count = 0
        real = module._audit_one

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(module, "_audit_one", counted)


@dataclass(frozen=True)
class TurnPlan:
    """One turn: ``rounds`` tool rounds then an answer."""

    rounds: int = 1
    low_usage: bool = False
    idle_before: bool = False
    new_header: bool = False
    trim_after: bool = False
    compact_after: bool = False
    flush_mid_step: bool = False


@dataclass
class Growing:
    """The builder and the writer of one session in ``root`` (a JSONL store),
    or in ``store`` when given; :meth:`close` the writer when done."""

    root: Path
    store: SessionStore | None = None
    header: dict[str, Any] = field(default_factory=lambda: dict(HEADER))
    """The initial request header (its config picks the wire and the cache rule)."""
    sid: str = "grown"
    now: list[int] = field(default_factory=lambda: [1_700_000_000_000])
    results: list[Event] = field(default_factory=list)
    compactions: int = 0
    on_flush: Callable[[], None] | None = None
    """Called after each flush: what a test checks of the log as stored then."""

    def __post_init__(self) -> None:
        self.builder = LogBuilder()
        self.builder.session = Session(self.sid, clock=self._clock)
        self.store = self.store or JsonlStore(self.root)
        self.writer = self.store.create(self.builder.session)
        self.first = True

    def _clock(self) -> int:
        self.now[0] += 1000
        return self.now[0]

    @property
    def path(self) -> Path:
        assert isinstance(self.store, JsonlStore)
        return self.store.path(self.sid)

    def close(self) -> None:
        self.writer.close()

    def flush(self) -> None:
        self.writer.flush()
        if self.on_flush is not None:
            self.on_flush()

    def turn(self, plan: TurnPlan) -> None:
        b = self.builder
        if plan.idle_before:
            self.now[0] += IDLE_GAP_MS
        b.user(f"Turn {b.turn + 1}: shout.")
        usage = LOW_USAGE if plan.low_usage else USAGE
        for i in range(plan.rounds):
            self._step(
                [{"type": "tool_call", "id": f"c{b.turn}-{i}", "name": "shout", "arguments": "{}"}],
                usage,
                plan,
                first_step=i == 0,
            )
            call_id = f"c{b.turn}-{i}"
            data = {"turn": b.turn, "step": b.step, "call_id": call_id}
            call = b.append("tool/call", {**data, "name": "shout", "arguments": "{}"})
            result = b.append(
                "tool/result",
                {**data, "content": f"result {call_id} " + "z" * 300, "is_error": False},
                surface_op="append",
                source_seqs=[call.seq],
            )
            self.results.append(result)
            b.append("step/end", {"turn": b.turn, "step": b.step})
        self._step([{"type": "text", "text": "Done."}], usage, plan, first_step=plan.rounds == 0)
        b.append("step/end", {"turn": b.turn, "step": b.step})
        b.append("turn/end", {"turn": b.turn, "reason": {"kind": "completed"}})
        on_surface = [r for r in self.results if r.seq in set(b.session.surface)]
        if plan.trim_after and on_surface:
            self.results.remove(on_surface[0])
            b.trim(on_surface[0])
        if plan.compact_after and len(b.session.surface) > 4:
            self.compactions += 1
            surface = list(b.session.surface)
            b.user("Summarise.")
            b.compact(f"k{self.compactions}", surface[0], surface[2])
            self._step([{"type": "text", "text": "Compacted."}], usage, plan, first_step=False)
            b.append("step/end", {"turn": b.turn, "step": b.step})
            b.append("turn/end", {"turn": b.turn, "reason": {"kind": "completed"}})

    def _step(
        self,
        content: list[dict[str, Any]],
        usage: dict[str, Any],
        plan: TurnPlan,
        *,
        first_step: bool,
    ) -> None:
        b = self.builder
        b.step += 1
        b.append("step/start", {"turn": b.turn, "step": b.step})
        if self.first:
            b.append("request/header", {"header": self.header, "reason": "initial"})
            self.first = False
        elif plan.new_header and first_step:
            header = {**self.header, "system": f"You are terse, turn {b.turn}."}
            b.append("request/header", {"header": header, "reason": "resume"})
        if plan.flush_mid_step and first_step:
            self.flush()  # the log as stored now ends in an open step
        config = self.header["config"]
        source = {"provider": config["provider"], "model": config["model"]}
        data = {"turn": b.turn, "step": b.step, "content": content, "source": source}
        b.append("assistant/message", {**data, "usage": usage}, surface_op="append")


def grow(growing: Growing, plans: list[TurnPlan]) -> None:
    """Each plan's turn, then a flush."""
    for plan in plans:
        growing.turn(plan)
        growing.flush()
