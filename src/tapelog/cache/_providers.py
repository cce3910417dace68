"""What each provider's prompt cache does, as documented: the rule, its lifetime, its scope.

Dated facts (late 2026), kept as configuration rather than constants in code;
docs/providers.md names the source of each. The cache audit reads them to say
what a cache *should* have held for a request, and to name a drop's cause when
the log shows one: an idle gap longer than the provider keeps a prefix, or a
new process in front of a cache that lives inside the process.

Providers registered at run time (``tapelog.llm.register_provider``, a
providers file) add their documented facts here through
:func:`register_provider_cache`; a provider this process knows nothing about
gets :data:`DEFAULT_PROVIDER_CACHE` (prefix reuse, no known lifetime), so the
audit of any log runs, whoever wrote it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from tapelog.cache._rules import Rule

__all__ = [
    "DEFAULT_PROVIDER_CACHE",
    "PROVIDER_CACHES",
    "ProviderCache",
    "provider_cache",
    "register_provider_cache",
    "unregister_provider_cache",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderCache:
    """One provider's prompt cache.

    ``idle_lifetime_ms`` is the shortest documented time an unused prefix is
    kept (``None``: no documented bound); a gap longer than that between two
    requests explains a miss. ``per_process`` says the cache lives in the
    serving process that a tapelog process starts itself (the in-process
    emulator, the embedded local model), so a new tapelog process starts
    with an empty cache.
    """

    rule: Rule
    idle_lifetime_ms: int | None
    per_process: bool = False
    source: str = ""


_MINUTE: Final = 60_000

PROVIDER_CACHES: Final[Mapping[str, ProviderCache]] = {
    "anthropic": ProviderCache(
        rule="anthropic",
        idle_lifetime_ms=5 * _MINUTE,
        source="docs/providers.md#anthropic-messages (5-minute TTL, refreshed on each hit)",
    ),
    "openai": ProviderCache(
        rule="openai",
        idle_lifetime_ms=5 * _MINUTE,
        source="docs/providers.md#openai (retention 5-10 minutes idle, at most 1 hour)",
    ),
    "deepseek": ProviderCache(
        rule="deepseek",
        idle_lifetime_ms=60 * _MINUTE,
        source="docs/providers.md#deepseek (best effort; entries live hours to days)",
    ),
    "compatible": ProviderCache(
        rule="deepseek",
        idle_lifetime_ms=None,
        source="docs/providers.md#real-servers (vLLM/llama.cpp: LRU eviction, no fixed lifetime)",
    ),
    "emulator": ProviderCache(
        rule="deepseek",
        idle_lifetime_ms=None,
        per_process=True,
        source="docs/emulator.md (deterministic, no eviction; in-process by default)",
    ),
    "local": ProviderCache(
        rule="deepseek",
        idle_lifetime_ms=None,
        per_process=True,
        source="docs/providers.md#local (llama.cpp KV prefix reuse inside the process)",
    ),
}
"""The documented cache of each provider in the provider table."""


DEFAULT_PROVIDER_CACHE: Final = ProviderCache(
    rule="deepseek",
    idle_lifetime_ms=None,
    source="docs/providers.md#registered-providers-and-presets (unknown provider: prefix reuse)",
)
"""The facts the audit assumes for a provider it has no facts for: the prompt
is reused as far as it repeats the previous one (the DeepSeek rule, the one
the OpenAI-compatible servers follow), and no idle lifetime explains a miss."""

_REGISTERED: dict[str, ProviderCache] = {}


def register_provider_cache(name: str, facts: ProviderCache) -> None:
    """Record the documented cache of a provider registered at run time.

    A provider of the built-in table keeps its facts (they are documented
    above and the emulator follows them); replacing a registered provider's
    facts is allowed, as re-registering the provider is.
    """
    if name in PROVIDER_CACHES:
        raise ValueError(f"{name!r} is a built-in provider; its cache facts are fixed")
    _REGISTERED[name] = facts


def unregister_provider_cache(name: str) -> None:
    """Forget a registered provider's facts (the audit falls back to the default)."""
    _REGISTERED.pop(name, None)


def provider_cache(provider: str) -> ProviderCache:
    """The cache facts of ``provider``: the built-in table's, a registered
    provider's, else :data:`DEFAULT_PROVIDER_CACHE`. Never raises."""
    facts = PROVIDER_CACHES.get(provider)
    if facts is None:
        facts = _REGISTERED.get(provider, DEFAULT_PROVIDER_CACHE)
    return facts
