"""Prompt caches and wires as the providers document them: pure rules, segments and facts.

Domain code below the wires: the emulator accounts the requests it serves with
these functions and the cache audit simulates a log's rebuilt requests with the
same ones, so the two cannot disagree. Nothing here does I/O or imports a web
framework. docs/providers.md lists the rules and their sources; docs/emulator.md
the token estimate. The wire profiles (what each wire can do: structured-output
modes, thinking, tool rules) live here for the same reason: the loop and the
emulator read one set of facts (docs/providers.md, "Wire profiles").
"""

from tapelog.cache._profiles import (
    OUTPUT_MODES,
    WIRE_PROFILES,
    OutputModeName,
    ReasoningSendBack,
    WireFamily,
    WireProfile,
    profile_for,
    wire_profile_named,
)
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
    "OUTPUT_MODES",
    "PROVIDER_CACHES",
    "WIRE_PROFILES",
    "CacheOutcome",
    "OutputModeName",
    "PrefixStore",
    "Prompt",
    "ProviderCache",
    "ReasoningSendBack",
    "Rule",
    "Segment",
    "SegmentSource",
    "WireFamily",
    "WireProfile",
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
    "profile_for",
    "provider_cache",
    "register_provider_cache",
    "unregister_provider_cache",
    "wire_profile_named",
]
