"""The cache rules, segments and sources that the emulator's accounting and the
cache audit share, so that the two cannot disagree (internal: docs/architecture.md).
"""

from tapelog.cache._profiles import OUTPUT_MODES, ReasoningSendBack, profile_for, wire_profile_named
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
    peek,
)
from tapelog.cache._segments import (
    anthropic_block_source,
    anthropic_marker_ttls,
    anthropic_sources,
    blocks_of,
    count_cache_controls,
    estimate_bytes,
    estimate_text,
    openai_message_source,
    openai_reply_message,
    openai_reply_sources,
    openai_sources,
    prefix_root,
    responses_item_source,
    responses_sources,
)

__all__ = [
    "OUTPUT_MODES",
    "CacheOutcome",
    "PrefixStore",
    "Prompt",
    "ReasoningSendBack",
    "Rule",
    "Segment",
    "SegmentSource",
    "account",
    "anthropic_block_source",
    "anthropic_marker_ttls",
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
    "peek",
    "prefix_root",
    "profile_for",
    "provider_cache",
    "responses_item_source",
    "responses_sources",
    "wire_profile_named",
]
