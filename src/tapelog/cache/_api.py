"""The cache package's internal API: what other tapelog packages use of it, users do not.

Users import the public names from :mod:`tapelog.cache` (docs/api.md). A package
that may import the cache layer takes these from here, the one private module of
the package it may import (docs/architecture.md, tests/test_layout.py).
"""

from tapelog.cache._providers import provider_cache
from tapelog.cache._rules import (
    CacheOutcome,
    PrefixStore,
    Prompt,
    Rule,
    Segment,
    SegmentSource,
    account,
    chain_segments,
)
from tapelog.cache._segments import (
    anthropic_block_source,
    anthropic_sources,
    blocks_of,
    count_cache_controls,
    estimate_bytes,
    estimate_text,
    openai_message_source,
    openai_reply_message,
    openai_reply_sources,
    openai_sources,
)

__all__ = [
    "CacheOutcome",
    "PrefixStore",
    "Prompt",
    "Rule",
    "Segment",
    "SegmentSource",
    "account",
    "anthropic_block_source",
    "anthropic_sources",
    "blocks_of",
    "chain_segments",
    "count_cache_controls",
    "estimate_bytes",
    "estimate_text",
    "openai_message_source",
    "openai_reply_message",
    "openai_reply_sources",
    "openai_sources",
    "provider_cache",
]
