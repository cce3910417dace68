"""Prompt caches as the providers document them: pure rules, segments and facts.

Domain code below the wires: the emulator accounts the requests it serves with
these functions and the cache audit simulates a log's rebuilt requests with the
same ones, so the two cannot disagree. Nothing here does I/O or imports a web
framework. docs/providers.md lists the rules and their sources; docs/emulator.md
the token estimate.
"""

from tapelog.cache._providers import (
    DEFAULT_PROVIDER_CACHE,
    PROVIDER_CACHES,
    ProviderCache,
    provider_cache,
    register_provider_cache,
    unregister_provider_cache,
)
from tapelog.cache._rules import (
    CacheOutcome,
    PrefixStore,
    Prompt,
    Rule,
    Segment,
    SegmentSource,
    account,
    anthropic_rule,
    chain_segments,
    deepseek_rule,
    openai_rule,
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
    "DEFAULT_PROVIDER_CACHE",
    "PROVIDER_CACHES",
    "CacheOutcome",
    "PrefixStore",
    "Prompt",
    "ProviderCache",
    "Rule",
    "Segment",
    "SegmentSource",
    "account",
    "anthropic_block_source",
    "anthropic_rule",
    "anthropic_sources",
    "blocks_of",
    "chain_segments",
    "count_cache_controls",
    "deepseek_rule",
    "estimate_bytes",
    "estimate_text",
    "openai_message_source",
    "openai_reply_message",
    "openai_reply_sources",
    "openai_rule",
    "openai_sources",
    "provider_cache",
    "register_provider_cache",
    "unregister_provider_cache",
]
