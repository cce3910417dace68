"""Local provider servers with deterministic prompt-cache accounting.

:class:`Emulator` speaks the OpenAI-compatible chat completions wire (DeepSeek
and OpenAI cache rules) and the Anthropic Messages wire, answers from a script
or a deterministic default policy, and reports cache usage by each provider's
documented rule. The rules themselves are pure functions over segment lists
(``deepseek_rule``, ``openai_rule``, ``anthropic_rule``). See docs/emulator.md.
"""

from tapelog.emulator._app import ROUTES, Emulator, ReceivedRequest, Rule
from tapelog.emulator._cache import (
    CacheOutcome,
    PrefixStore,
    Segment,
    SegmentSource,
    anthropic_rule,
    chain_segments,
    deepseek_rule,
    openai_rule,
)
from tapelog.emulator._render import anthropic_sources, estimate_bytes, openai_sources
from tapelog.emulator._script import Fault, Reply, ToolCallSpec, load_script, parse_entry

__all__ = [
    "ROUTES",
    "CacheOutcome",
    "Emulator",
    "Fault",
    "PrefixStore",
    "ReceivedRequest",
    "Reply",
    "Rule",
    "Segment",
    "SegmentSource",
    "ToolCallSpec",
    "anthropic_rule",
    "anthropic_sources",
    "chain_segments",
    "deepseek_rule",
    "estimate_bytes",
    "load_script",
    "openai_rule",
    "openai_sources",
    "parse_entry",
]
