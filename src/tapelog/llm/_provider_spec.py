"""One provider's entry: how to reach it, which wire it speaks, what its cache does.

A :class:`ProviderSpec` holds names and facts only: the API key variable is a
*name* (the key itself is read from the environment at send time, never
stored, never logged), the base URL carries no credentials. Validation lives
here so the registry, the presets and a providers file refuse bad data with
the same one-line sentences (docs/providers.md, "Registered providers and
presets").
"""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass
from typing import Any, Final, Literal, get_args

from tapelog._errors import TapelogError
from tapelog.cache import ProviderCache
from tapelog.cache._api import Rule
from tapelog.llm._openai_wire import OpenAIDialect

__all__ = ["Family", "ProviderSpec", "check_base_url", "check_name"]

Family = Literal["openai", "anthropic", "local"]
"""A wire family: OpenAI-compatible chat completions, Anthropic Messages, or
the embedded ``local`` model (built in only)."""

_NAME: Final = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
_ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_RULES: Final = get_args(Rule)
_DIALECTS: Final = get_args(OpenAIDialect)


def _fail(where: str, problem: str) -> TapelogError:
    return TapelogError(f"{where}: {problem}")


def check_name(name: object, where: str = "provider") -> str:
    """A provider name: 1-64 lower-case letters, digits, ``.``, ``_`` or ``-``,
    starting with a letter or digit (it is logged in every config and typed on
    the command line)."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        shown = repr(name)[:70] if isinstance(name, str) else type(name).__name__
        raise _fail(
            where,
            f"the provider name {shown} is not 1-64 lower-case letters, digits, '.', '_' or "
            "'-' starting with a letter or digit",
        )
    return name


def check_base_url(url: object, where: str) -> str:
    """An ``http``/``https`` URL with a host and no credentials in it (a key
    belongs in its environment variable, never in a URL that may be printed)."""
    if not isinstance(url, str):
        raise _fail(where, f"base_url must be a string, not {type(url).__name__}")
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise _fail(where, "base_url must be an http:// or https:// URL with a host")
    if parts.username is not None or parts.password is not None:
        raise _fail(
            where,
            "base_url must not contain credentials; put the key in an environment "
            "variable and name it with api_key_env",
        )
    return url


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderSpec:
    """How to reach one provider. ``key_required=False`` sends a key only if set.

    ``family`` and ``dialect`` decide the wire (for a provider outside the
    built-in table they are logged in ``config.wire``, so a log rebuilds
    without this entry); ``default_model`` is what the CLI uses without
    ``--model``; ``context_window`` (tokens) turns on automatic compaction in
    the CLI; ``cache`` holds the documented cache facts the audit uses
    (``None`` for the built-in table, whose facts are
    ``tapelog.cache.PROVIDER_CACHES``).
    """

    name: str
    family: Family
    dialect: OpenAIDialect | None
    base_url: str | None
    api_key_env: str | None
    key_required: bool
    default_model: str | None = None
    context_window: int | None = None
    cache: ProviderCache | None = None

    def __post_init__(self) -> None:
        where = f"provider {check_name(self.name)!r}"
        if self.family not in get_args(Family):
            raise _fail(where, f"family must be 'openai' or 'anthropic', got {self.family!r}")
        if self.family == "anthropic" and self.dialect is not None:
            raise _fail(where, "the anthropic family has no dialect; leave dialect out")
        if self.family != "anthropic" and self.dialect not in _DIALECTS:
            raise _fail(where, f"dialect must be one of {', '.join(_DIALECTS)}")
        if self.base_url is not None:
            check_base_url(self.base_url, where)
        if self.api_key_env is not None and (
            not isinstance(self.api_key_env, str) or not _ENV_NAME.fullmatch(self.api_key_env)
        ):
            # The value is not shown: a key pasted here by mistake must not be echoed.
            raise _fail(
                where,
                "api_key_env must be the NAME of an environment variable (letters, digits "
                "and '_'); the key itself stays in the environment",
            )
        if not isinstance(self.key_required, bool):
            raise _fail(where, "key_required must be true or false")
        if self.key_required and self.api_key_env is None:
            raise _fail(where, "key_required needs api_key_env, the variable that holds the key")
        if self.default_model is not None and (
            not isinstance(self.default_model, str) or not self.default_model.strip()
        ):
            raise _fail(where, "default_model must be a non-empty string")
        if self.context_window is not None and (
            isinstance(self.context_window, bool)
            or not isinstance(self.context_window, int)
            or self.context_window <= 0
        ):
            raise _fail(where, "context_window must be a positive number of tokens")
        if self.cache is not None:
            _check_cache(self.cache, where)

    def wire_identity(self) -> dict[str, Any]:
        """What ``config.wire`` records for this provider when it is not built in."""
        if self.family == "anthropic":
            return {"family": "anthropic"}
        return {"family": self.family, "dialect": self.dialect}


def _check_cache(cache: ProviderCache, where: str) -> None:
    if cache.rule not in _RULES:
        raise _fail(where, f"cache_rule must be one of {', '.join(_RULES)}, got {cache.rule!r}")
    lifetime = cache.idle_lifetime_ms
    if lifetime is not None and (
        isinstance(lifetime, bool) or not isinstance(lifetime, int) or lifetime <= 0
    ):
        raise _fail(where, "cache_idle_lifetime_ms must be a positive number of milliseconds")
