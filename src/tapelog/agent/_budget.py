"""Budgets: how many tokens, requests and dollars a turn and a session may use.

The loop asks :class:`BudgetGuard` before every step's request, never during
one: a request that was sent is answered and logged whole, so a limit can be
overrun by the last request's usage, but no request starts once a limit is
reached. The turn then ends with ``turn/end`` ``{"kind": "budget", "scope":
"turn" | "session", "limit": <field of Limits>, "max", "used"}``.

What has been used is read from the log, so a resumed session's budget counts
what earlier processes spent: tokens from each ``assistant/message``'s usage
(prompt tokens are ``input + cache_read + cache_write``), requests from each
``step/end`` whose request was sent (retries of it included in one), cost from
the usage priced at the message's own provider and model. Compaction's
summary calls are not counted. The guard reads only the events appended since
it last looked (O(new)).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from tapelog._errors import TapelogError
from tapelog.agent._pricing import DEFAULT_PRICES, Price, price_for
from tapelog.llm._api import usage_prompt_tokens
from tapelog.log._api import Event, LlmCallConfig, Session

__all__ = ["Budget", "BudgetGuard", "Limits"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """Upper bounds (``None``: no bound): prompt (``input_tokens``), ``output_tokens``,
    ``total_tokens`` (both), ``requests`` sent, and ``cost`` in US dollars."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    requests: int | None = None
    cost: float | None = None

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            whole = f.name != "cost"
            if (whole and (not isinstance(value, int) or isinstance(value, bool))) or not (
                isinstance(value, (int, float)) and math.isfinite(value) and value > 0
            ):
                kind = "a positive integer" if whole else "a positive number"
                raise ValueError(f"Limits.{f.name} must be {kind}, not {value!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Budget:
    """The limits of each turn and of the whole session, and the prices that
    make ``cost`` (``pricing`` by ``"provider:model"`` or model name, over
    :attr:`DEFAULT_PRICES`)."""

    DEFAULT_PRICES: ClassVar[Mapping[str, Price]] = DEFAULT_PRICES
    """Dated list prices (:mod:`tapelog.agent._pricing`) that ``pricing`` overrides or extends."""

    turn: Limits | None = None
    session: Limits | None = None
    pricing: Mapping[str, Price] = field(default_factory=dict)

    def prices(self) -> Mapping[str, Price]:
        return {**DEFAULT_PRICES, **self.pricing}


@dataclass(slots=True)
class _Spent:
    input_tokens: int = 0
    output_tokens: int = 0
    requests: int = 0
    cost: float = 0.0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


class BudgetGuard:
    """What a session and its turns have spent, read from the log (module docstring)."""

    def __init__(self, budget: Budget | None, config: LlmCallConfig) -> None:
        self.budget = budget
        self._prices = budget.prices() if budget is not None else {}
        self._costed = budget is not None and any(
            limits is not None and limits.cost is not None
            for limits in (budget.turn, budget.session)
        )
        if self._costed:
            self._price(config.provider, config.model)  # refused now, not at the first turn
        self._seen = 0  # events read so far
        self._session = _Spent()
        self._turns: dict[int, _Spent] = {}

    def _price(self, provider: str, model: str) -> Price:
        price = price_for(self._prices, provider, model)
        if price is None:
            raise TapelogError(
                f"the budget limits cost, but there is no price for {provider}:{model}; "
                f"pass Budget(pricing={{'{provider}:{model}': Price(input=..., output=...)}})"
            )
        return price

    def over(self, session: Session, turn: int) -> dict[str, Any] | None:
        """The ``turn/end`` reason if a limit is reached before turn ``turn``'s
        next request, else ``None``."""
        budget = self.budget
        if budget is None:
            return None
        self._read(session)
        for scope, limits, spent in (
            ("turn", budget.turn, self._turns.get(turn, _Spent())),
            ("session", budget.session, self._session),
        ):
            if limits is None:
                continue
            for f in fields(limits):
                bound = getattr(limits, f.name)
                used = getattr(spent, f.name)
                if bound is not None and used >= bound:
                    if isinstance(used, float):
                        used = round(used, 9)
                    return {
                        "kind": "budget",
                        "scope": scope,
                        "limit": f.name,
                        "max": bound,
                        "used": used,
                    }
        return None

    def _read(self, session: Session) -> None:
        events = session.events
        for seq in range(self._seen, len(events)):
            self._count(events[seq])
        self._seen = len(events)

    def _count(self, event: Event) -> None:
        if event.type == "step/end" and event.data.get("sent", True):
            for spent in self._both(event.data["turn"]):
                spent.requests += 1
        elif event.type == "assistant/message":
            data = event.data
            usage, source = data.get("usage"), data["source"]
            if not usage or source.get("kind") == "client":
                return
            cost = 0.0
            if self._costed:
                cost = self._price(source["provider"], source["model"]).cost(usage)
            for spent in self._both(data["turn"]):
                spent.input_tokens += usage_prompt_tokens(usage)
                spent.output_tokens += int(usage.get("output", 0))
                spent.cost += cost

    def _both(self, turn: int) -> tuple[_Spent, _Spent]:
        return self._session, self._turns.setdefault(turn, _Spent())
