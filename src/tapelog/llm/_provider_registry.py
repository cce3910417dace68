"""The provider table: the built-in providers, the presets and providers registered at run time.

The built-in table (:data:`PROVIDERS`) fixes each provider's wire by its name,
as it always has. Every other provider -- a preset or one a user registered --
has its wire identity (family, dialect) written into the logged config, in
``config.wire``, by :func:`complete_config`. That keeps the rebuild a pure
function of the log: ``wire_for(config)`` needs no registry to rebuild a
request sent to ``myco``, in this process or in one that never heard of it.
The registry only adds what a log must never hold or does not need: where to
send (base URL), which environment variable holds the key, defaults for the
command line and the documented cache facts.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final, Literal, get_args

from tapelog._errors import HeaderError, TapelogError
from tapelog.cache import (
    ProviderCache,
    WireProfile,
    register_provider_cache,
    unregister_provider_cache,
)
from tapelog.cache._api import Rule, profile_for
from tapelog.llm._openai_wire import OpenAIDialect
from tapelog.llm._presets import PRESETS
from tapelog.llm._provider_spec import ProviderSpec, check_name
from tapelog.log._api import LlmCallConfig

__all__ = [
    "DEFAULT_MODELS",
    "EMULATOR_BASE_URL",
    "PROVIDERS",
    "build_spec",
    "complete_config",
    "default_model",
    "known_providers",
    "provider_spec",
    "register_provider",
    "register_spec",
    "unregister_provider",
    "wire_identity",
    "wire_options",
    "wire_profile",
]

EMULATOR_BASE_URL: Final = "http://emulator/v1"

PROVIDERS: Final[Mapping[str, ProviderSpec]] = {
    spec.name: spec
    for spec in (
        ProviderSpec(
            name="anthropic",
            family="anthropic",
            dialect=None,
            base_url="https://api.anthropic.com",
            api_key_env="ANTHROPIC_API_KEY",
            key_required=True,
        ),
        # Any OpenAI-compatible server (vLLM, llama.cpp, Ollama, SGLang): the
        # base URL is required; OPENAI_API_KEY is sent when set.
        ProviderSpec(
            name="compatible",
            family="openai",
            dialect="compatible",
            base_url=None,
            api_key_env="OPENAI_API_KEY",
            key_required=False,
        ),
        ProviderSpec(
            name="deepseek",
            family="openai",
            dialect="deepseek",
            base_url="https://api.deepseek.com",
            api_key_env="DEEPSEEK_API_KEY",
            key_required=True,
        ),
        # The in-process emulator (tapelog.emulator), reached through an ASGI
        # transport; the host name is never resolved.
        ProviderSpec(
            name="emulator",
            family="openai",
            dialect="compatible",
            base_url=EMULATOR_BASE_URL,
            api_key_env=None,
            key_required=False,
        ),
        ProviderSpec(
            name="local",
            family="local",
            dialect="compatible",
            base_url=None,
            api_key_env=None,
            key_required=False,
        ),
        ProviderSpec(
            name="openai",
            family="openai",
            dialect="openai",
            base_url="https://api.openai.com/v1",
            api_key_env="OPENAI_API_KEY",
            key_required=True,
        ),
    )
}
"""The built-in providers: their wire follows from the name alone."""

DEFAULT_MODELS: Final[Mapping[str, str]] = {
    # Dated defaults (late 2026) for the CLI when no model is given; every
    # request logs the model it used, so changing these never changes a log.
    "anthropic": "claude-sonnet-4-5",
    "deepseek": "deepseek-chat",
    "emulator": "emulator-1",
    "local": "smollm2-135m",
    "openai": "gpt-4.1-mini",
}

_IDENTITY: Final = ("family", "dialect")
_DIALECTS: Final = get_args(OpenAIDialect)

_registered: dict[str, ProviderSpec] = {}


def _remember(spec: ProviderSpec) -> None:
    assert spec.cache is not None
    _registered[spec.name] = spec
    register_provider_cache(spec.name, spec.cache)


for _preset in PRESETS.values():
    _remember(_preset)


def build_spec(
    name: str,
    *,
    family: Literal["openai", "anthropic"],
    dialect: OpenAIDialect | None = None,
    base_url: str | None = None,
    api_key_env: str | None = None,
    key_required: bool = False,
    default_model: str | None = None,
    context_window: int | None = None,
    cache_rule: Rule | None = None,
    cache_idle_lifetime_ms: int | None = None,
) -> ProviderSpec:
    """The checked :class:`ProviderSpec` that :func:`register_provider` would
    register (nothing is registered)."""
    where = f"provider {check_name(name)!r}"
    if name in PROVIDERS:
        raise TapelogError(
            f"{where}: is a built-in provider and cannot be registered; choose another name"
        )
    if family not in ("openai", "anthropic"):
        raise TapelogError(f"{where}: family must be 'openai' or 'anthropic', got {family!r}")
    if family == "openai" and dialect is None:
        dialect = "compatible"
    rule: Rule = cache_rule or ("anthropic" if family == "anthropic" else "deepseek")
    return ProviderSpec(
        name=name,
        family=family,
        dialect=dialect,
        base_url=base_url,
        api_key_env=api_key_env,
        key_required=key_required,
        default_model=default_model,
        context_window=context_window,
        cache=ProviderCache(
            rule=rule,
            idle_lifetime_ms=cache_idle_lifetime_ms,
            source="registered (tapelog.llm.register_provider or a providers file)",
        ),
    )


def register_spec(spec: ProviderSpec, *, replace: bool) -> ProviderSpec:
    """Register a spec made by :func:`build_spec` (see :func:`register_provider`)."""
    old = _registered.get(spec.name)
    if old is not None and old != spec and not replace:
        kind = "a preset" if PRESETS.get(spec.name) == old else "registered"
        raise TapelogError(
            f"provider {spec.name!r}: is already {kind} with other settings; pass "
            "replace=True to replace it"
        )
    _remember(spec)
    return spec


def register_provider(
    name: str,
    *,
    family: Literal["openai", "anthropic"],
    dialect: OpenAIDialect | None = None,
    base_url: str | None = None,
    api_key_env: str | None = None,
    key_required: bool = False,
    default_model: str | None = None,
    context_window: int | None = None,
    cache_rule: Rule | None = None,
    cache_idle_lifetime_ms: int | None = None,
    replace: bool = False,
) -> ProviderSpec:
    """Register a provider by name; the registered :class:`ProviderSpec`.

    ``family`` is the wire (``openai``: chat completions; ``anthropic``:
    Messages); ``dialect`` the OpenAI-compatible dialect (default
    ``compatible``). ``api_key_env`` names the environment variable the key
    is read from at send time (never the key). ``cache_rule`` (default: the
    Anthropic rule for that family, else prefix reuse) and
    ``cache_idle_lifetime_ms`` (default: none known) are what the cache audit
    assumes. Re-registering a name with different facts needs
    ``replace=True``; the built-in names cannot be registered. Bad data raises
    :class:`~tapelog.TapelogError` with one sentence naming the field.
    """
    spec = build_spec(
        name,
        family=family,
        dialect=dialect,
        base_url=base_url,
        api_key_env=api_key_env,
        key_required=key_required,
        default_model=default_model,
        context_window=context_window,
        cache_rule=cache_rule,
        cache_idle_lifetime_ms=cache_idle_lifetime_ms,
    )
    return register_spec(spec, replace=replace)


def unregister_provider(name: str) -> None:
    """Forget a registered provider (or a preset) in this process.

    Logs that used it still rebuild (their config records the wire); only new
    clients for it and its cache facts are gone.
    """
    if name in PROVIDERS:
        raise TapelogError(f"provider {name!r}: is built in and cannot be unregistered")
    if _registered.pop(name, None) is not None:
        unregister_provider_cache(name)


def known_providers() -> Mapping[str, ProviderSpec]:
    """Every provider this process knows: the built-in table, then the presets
    and registered providers (a read-only snapshot)."""
    return MappingProxyType({**PROVIDERS, **dict(sorted(_registered.items()))})


def _unknown(name: str) -> HeaderError:
    builtin = ", ".join(sorted(PROVIDERS))
    others = ", ".join(sorted(_registered)) or "none"
    return HeaderError(
        f"config.provider {name!r} is not a known provider; use one of {builtin}, a "
        f"registered one ({others}), or register it (tapelog.llm.register_provider or a "
        "providers file, docs/providers.md)."
    )


def provider_spec(name: str) -> ProviderSpec:
    """The entry for ``name`` (built in, preset or registered), or a clear
    error naming the known providers."""
    spec = PROVIDERS.get(name) or _registered.get(name)
    if spec is None:
        raise _unknown(name)
    return spec


def default_model(name: str) -> str | None:
    """The model the CLI uses for ``name`` when none is given (None: ask for one)."""
    spec = PROVIDERS.get(name) or _registered.get(name)
    if spec is not None and spec.default_model is not None:
        return spec.default_model
    return DEFAULT_MODELS.get(name)


def wire_profile(config: LlmCallConfig) -> WireProfile:
    """What the wire of a logged config can do (``tapelog.cache.WIRE_PROFILES``),
    by the wire identity the config implies: pure, like :func:`wire_identity`."""
    family, dialect = wire_identity(config)
    return profile_for(config.provider, family, dialect)


def wire_identity(config: LlmCallConfig) -> tuple[str, OpenAIDialect | None]:
    """The wire family and dialect a logged config implies (pure: no registry).

    A built-in provider's come from the table (its ``config.wire`` need not
    name them, and may only repeat them exactly: a log stays valid if a name
    it registered ever joins the table); any other provider's are
    ``config.wire.family`` and ``config.wire.dialect`` (OpenAI family only),
    which :func:`complete_config` fills in from the registry before the
    config is logged.
    """
    wire = config.wire
    spec = PROVIDERS.get(config.provider)
    if spec is not None:
        named = {k: wire[k] for k in _IDENTITY if k in wire}
        if named and (spec.family == "local" or named != spec.wire_identity()):
            raise HeaderError(
                f"config.wire names the wire {named}, but the built-in {config.provider} "
                "provider's wire follows from its name; leave family and dialect out."
            )
        return spec.family, spec.dialect
    family = wire.get("family")
    if family is None:
        raise HeaderError(
            f"config.provider {config.provider!r} is not a built-in provider and config.wire "
            'names no wire family (e.g. {"family": "openai", "dialect": "compatible"}); '
            "register the provider (tapelog.llm.register_provider or a providers file) so "
            "the config is completed before it is logged, or write config.wire yourself."
        )
    if family not in ("openai", "anthropic"):
        raise HeaderError(f"config.wire.family must be 'openai' or 'anthropic', got {family!r}.")
    dialect = wire.get("dialect")
    if family == "anthropic":
        if dialect is not None:
            raise HeaderError("config.wire.dialect is for the openai family only; leave it out.")
        return "anthropic", None
    if dialect not in _DIALECTS:
        raise HeaderError(
            f"config.wire.dialect must be one of {', '.join(_DIALECTS)} for the openai "
            f"family, got {dialect!r}."
        )
    return "openai", dialect


def wire_options(config: LlmCallConfig) -> Mapping[str, Any]:
    """``config.wire`` without the wire identity: the options the wire reads."""
    return {k: v for k, v in config.wire.items() if k not in _IDENTITY}


def complete_config(config: LlmCallConfig) -> LlmCallConfig:
    """``config`` with the wire identity a log needs to rebuild it.

    Unchanged for a built-in provider and for a config that already names its
    family (the config's own identity wins over the registry: the log
    decides). Otherwise the registered provider's family and dialect are put
    first in ``config.wire``; an unregistered provider is a
    :class:`~tapelog.HeaderError`. The agent calls this on every request's
    config, so ``LlmCallConfig(provider="myco", model=...)`` just works.
    """
    if config.provider in PROVIDERS or "family" in config.wire:
        wire_identity(config)  # validates
        return config
    spec = _registered.get(config.provider)
    if spec is None:
        raise _unknown(config.provider)
    if "dialect" in config.wire:
        raise HeaderError("config.wire.dialect needs config.wire.family too; name both or neither.")
    return config.replace(wire={**spec.wire_identity(), **config.wire})
