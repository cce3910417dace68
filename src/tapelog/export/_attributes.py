"""Span attributes from the log's values: call config, usage, the cache audit's row.

Pure functions of one logged value each, so the mapping tables of docs/otel.md
read straight off them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tapelog.audit._api import CacheTotals, RequestCache
from tapelog.export import _semconv as sc
from tapelog.export._model import AttributeValue
from tapelog.llm._api import usage_prompt_tokens
from tapelog.log._api import LlmCallConfig

__all__ = ["cache_attributes", "config_attributes", "totals_attributes", "usage_attributes"]


def config_attributes(config: LlmCallConfig) -> dict[str, AttributeValue]:
    """Provider, model and the sampling settings a request was made with (those set)."""
    attrs: dict[str, AttributeValue] = {
        sc.GEN_AI_PROVIDER_NAME: config.provider,
        sc.GEN_AI_SYSTEM: config.provider,
        sc.GEN_AI_REQUEST_MODEL: config.model,
    }
    scalars = (
        (sc.GEN_AI_REQUEST_MAX_TOKENS, config.max_tokens),
        (sc.GEN_AI_REQUEST_TEMPERATURE, config.temperature),
        (sc.GEN_AI_REQUEST_TOP_P, config.top_p),
        (sc.GEN_AI_REQUEST_SEED, config.seed),
    )
    for name, value in scalars:
        # OTLP integers are 64-bit signed; the log allows up to 2**64 - 1.
        if isinstance(value, int) and not -(2**63) <= value < 2**63:
            attrs[name] = str(value)
        elif value is not None:
            attrs[name] = value
    if config.stop:
        attrs[sc.GEN_AI_REQUEST_STOP_SEQUENCES] = tuple(config.stop)
    return attrs


def usage_attributes(usage: Mapping[str, Any] | None) -> dict[str, AttributeValue]:
    """Token usage: the conventions count cached tokens inside ``input_tokens``.

    tapelog's normalised counts are disjoint (docs/format.md, "Chunks"), so
    ``input_tokens`` is ``input + cache_read + cache_write``; reasoning tokens
    are part of ``output``, as in the conventions.
    """
    if not usage:
        return {}
    return {
        sc.GEN_AI_USAGE_INPUT_TOKENS: usage_prompt_tokens(usage),
        sc.GEN_AI_USAGE_OUTPUT_TOKENS: int(usage.get("output", 0)),
        sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: int(usage.get("cache_read", 0)),
        sc.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: int(usage.get("cache_write", 0)),
        sc.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: int(usage.get("reasoning", 0)),
    }


def cache_attributes(row: RequestCache) -> dict[str, AttributeValue]:
    """The cache audit of one loop request (``tapelog cache``'s row, docs/cli.md)."""
    attrs: dict[str, AttributeValue] = {
        "tapelog.request.index": row.index,
        "tapelog.cache.rule": row.rule,
        "tapelog.cache.reported_tokens": row.cached_reported,
        "tapelog.cache.expected_tokens": row.cached_expected,
        "tapelog.cache.shared_prefix_tokens": row.shared_prefix_tokens,
        "tapelog.cache.drop": row.drop,
    }
    if row.causes:
        attrs["tapelog.cache.causes"] = tuple(c.kind for c in row.causes)
        attrs["tapelog.cache.cause_labels"] = tuple(c.label for c in row.causes)
        seqs = sorted({s for c in row.causes for s in c.seqs})
        if seqs:
            attrs["tapelog.cache.cause_seqs"] = tuple(seqs)
    return attrs


def totals_attributes(totals: CacheTotals) -> dict[str, AttributeValue]:
    """The cache audit's totals, on the session's root span."""
    return {
        "tapelog.requests": totals.requests,
        "tapelog.cache.prompt_tokens": totals.prompt_tokens,
        "tapelog.cache.reported_tokens": totals.cached_reported,
        "tapelog.cache.expected_tokens": totals.cached_expected,
        "tapelog.cache.hit_ratio": totals.hit_ratio,
        "tapelog.cache.efficiency": totals.efficiency,
    }
