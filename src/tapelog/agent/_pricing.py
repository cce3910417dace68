"""What tokens cost: a price per model, and dated list prices to start from.

Prices are per million tokens, in US dollars. A prompt's tokens are priced by
kind: those read from the provider's cache (``cache_read``), those written to
it (``cache_write``) and the rest (``input``); a price that gives no cache
rates charges them at the input rate. :data:`DEFAULT_PRICES` are the list
prices the providers published (checked October 2025); they change, so a
budget's ``pricing`` overrides or extends them (``Budget(pricing=...)``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

__all__ = ["DEFAULT_PRICES", "Price", "price_for"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Price:
    """US dollars per million tokens: ``input`` (prompt tokens not from cache),
    ``output``, and the cache rates (``None``: charged as ``input``)."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None

    def __post_init__(self) -> None:
        for name in ("input", "output", "cache_read", "cache_write"):
            value = getattr(self, name)
            if value is not None and not value >= 0:
                raise ValueError(f"Price.{name} must be a non-negative number, not {value!r}")

    def cost(self, usage: Mapping[str, Any]) -> float:
        """The cost of one normalised usage object (``input``, ``cache_read``, ...)."""
        read = self.input if self.cache_read is None else self.cache_read
        write = self.input if self.cache_write is None else self.cache_write
        dollars = (
            usage.get("input", 0) * self.input
            + usage.get("cache_read", 0) * read
            + usage.get("cache_write", 0) * write
            + usage.get("output", 0) * self.output
        )
        return float(dollars) / 1_000_000


DEFAULT_PRICES: Final[Mapping[str, Price]] = MappingProxyType(
    {
        # OpenAI: cached input is the cache_read rate; writing the cache is free.
        "openai:gpt-4.1": Price(input=2.0, cache_read=0.5, cache_write=2.0, output=8.0),
        "openai:gpt-4.1-mini": Price(input=0.4, cache_read=0.1, cache_write=0.4, output=1.6),
        "openai:gpt-4.1-nano": Price(input=0.1, cache_read=0.025, cache_write=0.1, output=0.4),
        "openai:gpt-4o": Price(input=2.5, cache_read=1.25, cache_write=2.5, output=10.0),
        "openai:gpt-4o-mini": Price(input=0.15, cache_read=0.075, cache_write=0.15, output=0.6),
        "openai:gpt-5": Price(input=1.25, cache_read=0.125, cache_write=1.25, output=10.0),
        "openai:gpt-5-mini": Price(input=0.25, cache_read=0.025, cache_write=0.25, output=2.0),
        # Anthropic: a 5-minute cache write costs 1.25x input, a read 0.1x.
        "anthropic:claude-sonnet-4-5": Price(
            input=3.0, cache_read=0.3, cache_write=3.75, output=15.0
        ),
        "anthropic:claude-haiku-4-5": Price(
            input=1.0, cache_read=0.1, cache_write=1.25, output=5.0
        ),
        "anthropic:claude-opus-4-1": Price(
            input=15.0, cache_read=1.5, cache_write=18.75, output=75.0
        ),
        # DeepSeek: a cache miss is input, a hit cache_read.
        "deepseek:deepseek-chat": Price(
            input=0.28, cache_read=0.028, cache_write=0.28, output=0.42
        ),
        "deepseek:deepseek-reasoner": Price(
            input=0.28, cache_read=0.028, cache_write=0.28, output=0.42
        ),
    }
)


def price_for(pricing: Mapping[str, Price], provider: str, model: str) -> Price | None:
    """The price of ``provider:model`` (or of ``model`` alone) in ``pricing``."""
    return pricing.get(f"{provider}:{model}") or pricing.get(model)
