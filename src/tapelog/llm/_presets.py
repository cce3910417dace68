"""Presets: registered providers shipped with tapelog for common OpenAI-compatible servers.

Each is an ordinary registration (a log records its wire in ``config.wire``,
so it rebuilds in any process, also after a preset changes). All of them use
the ``compatible`` dialect: ``max_tokens`` (all of them take it),
``stream_options: {"include_usage": true}`` (honoured by most, ignored by
some) and no reasoning sent back; their quirks are in what they return,
which the stream parser already reads (facts and dates in docs/providers.md,
"Registered providers and presets"). None has a default model: what a
gateway routes to or a local server has loaded is the user's choice, so the
CLI asks for ``--model``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from tapelog.cache import ProviderCache
from tapelog.llm._provider_spec import ProviderSpec

__all__ = ["PRESETS"]

_MINUTE: Final = 60_000
_SOURCE: Final = "docs/providers.md#registered-providers-and-presets"


def _prefix_cache(lifetime_ms: int | None, why: str) -> ProviderCache:
    return ProviderCache(rule="deepseek", idle_lifetime_ms=lifetime_ms, source=f"{_SOURCE} ({why})")


PRESETS: Final[Mapping[str, ProviderSpec]] = {
    spec.name: spec
    for spec in (
        # Checked 2026-12: the cache is the routed upstream's (none, automatic
        # or breakpoint-based), so no lifetime is assumed; usage (with
        # prompt_tokens_details.cached_tokens) comes in the last frame.
        ProviderSpec(
            name="openrouter",
            family="openai",
            dialect="compatible",
            base_url="https://openrouter.ai/api/v1",
            api_key_env="OPENROUTER_API_KEY",
            key_required=True,
            cache=_prefix_cache(None, "depends on the upstream it routes to"),
        ),
        # `vllm serve` listens on port 8000; a key is checked only when the
        # server was started with --api-key (or VLLM_API_KEY).
        ProviderSpec(
            name="vllm",
            family="openai",
            dialect="compatible",
            base_url="http://localhost:8000/v1",
            api_key_env="VLLM_API_KEY",
            key_required=False,
            cache=_prefix_cache(None, "automatic prefix caching, LRU eviction"),
        ),
        # The local server ignores keys; OLLAMA_API_KEY is for Ollama's cloud
        # API (a --base-url away). A model idle for keep_alive (5 minutes by
        # default) is unloaded, and its cached prefix with it.
        ProviderSpec(
            name="ollama",
            family="openai",
            dialect="compatible",
            base_url="http://localhost:11434/v1",
            api_key_env="OLLAMA_API_KEY",
            key_required=False,
            cache=_prefix_cache(5 * _MINUTE, "keep_alive: idle models unloaded after 5 minutes"),
        ),
        # No authentication unless "Require Authentication" is on (LM Studio
        # 0.4.0 and later: an API token, conventionally in LM_API_TOKEN).
        # Just-in-time loaded models are unloaded after the idle TTL, 60
        # minutes by default.
        ProviderSpec(
            name="lmstudio",
            family="openai",
            dialect="compatible",
            base_url="http://localhost:1234/v1",
            api_key_env="LM_API_TOKEN",
            key_required=False,
            cache=_prefix_cache(60 * _MINUTE, "JIT-loaded models: idle TTL 60 minutes"),
        ),
        ProviderSpec(
            name="together",
            family="openai",
            dialect="compatible",
            base_url="https://api.together.ai/v1",
            api_key_env="TOGETHER_API_KEY",
            key_required=True,
            cache=_prefix_cache(None, "no documented lifetime"),
        ),
    )
}
"""The presets, by name (docs/providers.md, "Registered providers and presets")."""
