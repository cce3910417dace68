"""Local provider servers with deterministic prompt-cache accounting.

:class:`Emulator` speaks the OpenAI-compatible chat completions wire (DeepSeek
and OpenAI cache rules) and the Anthropic Messages wire, answers from a script
or a deterministic default policy, and reports cache usage by each provider's
documented rule. The rules themselves live in :mod:`tapelog.cache` (pure
functions over segment lists, shared with the cache audit) and are re-exported
here for convenience. See docs/emulator.md.
"""

from tapelog.cache import (
    CacheOutcome,
    PrefixStore,
    Prompt,
    Rule,
    Segment,
    SegmentSource,
    account,
    anthropic_block_source,
    anthropic_rule,
    anthropic_sources,
    chain_segments,
    deepseek_rule,
    estimate_bytes,
    openai_message_source,
    openai_rule,
    openai_sources,
)
from tapelog.emulator._app import ROUTES, Emulator, ReceivedRequest
from tapelog.emulator._openai_wire import reply_sources
from tapelog.emulator._script import Fault, Reply, ToolCallSpec, load_script, parse_entry

__all__ = [
    "ROUTES",
    "CacheOutcome",
    "Emulator",
    "Fault",
    "PrefixStore",
    "Prompt",
    "ReceivedRequest",
    "Reply",
    "Rule",
    "Segment",
    "SegmentSource",
    "ToolCallSpec",
    "account",
    "anthropic_block_source",
    "anthropic_rule",
    "anthropic_sources",
    "chain_segments",
    "deepseek_rule",
    "estimate_bytes",
    "load_script",
    "openai_message_source",
    "openai_rule",
    "openai_sources",
    "parse_entry",
    "reply_sources",
]
