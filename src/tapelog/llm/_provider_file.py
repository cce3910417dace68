"""Providers files: register providers from TOML, without Python code.

    [providers.myco]
    family = "openai"              # or "anthropic"
    dialect = "compatible"         # openai family: openai, deepseek or compatible
    base_url = "https://llm.myco.example/v1"
    api_key_env = "MYCO_API_KEY"   # the variable's NAME; the key stays in the environment
    key_required = true
    default_model = "myco-large"
    context_window = 128000
    cache_rule = "deepseek"        # deepseek (prefix reuse), openai or anthropic
    cache_idle_lifetime_ms = 300000

A file is checked whole before anything in it is registered, and an entry
replaces a registration of the same name (the file is the user's word for it).
Every error is one sentence naming the file, the entry and the field; a value
is never echoed where it might be a key.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from tapelog._errors import TapelogError
from tapelog.llm._provider_registry import build_spec, register_spec
from tapelog.llm._provider_spec import ProviderSpec, check_name

__all__ = ["load_providers", "parse_providers"]

_FIELDS: Final[Mapping[str, type]] = {
    "family": str,
    "dialect": str,
    "base_url": str,
    "api_key_env": str,
    "key_required": bool,
    "default_model": str,
    "context_window": int,
    "cache_rule": str,
    "cache_idle_lifetime_ms": int,
}
_MAX_BYTES: Final = 1 << 20  # a providers file is a few lines; refuse anything huge


def _looks_like_a_key(field: str) -> bool:
    lowered = field.lower()
    return any(word in lowered for word in ("key", "token", "secret", "password"))


def _entry(name: str, table: Any, where: str) -> dict[str, Any]:
    """The keyword arguments of one entry, checked for names and types."""
    if not isinstance(table, Mapping):
        raise TapelogError(f"{where}: [providers.{name}] must be a table of settings")
    kwargs: dict[str, Any] = {}
    for field, value in table.items():
        expected = _FIELDS.get(field)
        if expected is None:
            if _looks_like_a_key(field):
                raise TapelogError(
                    f"{where}: [providers.{name}] has the field {field!r}; tapelog never reads "
                    "a key from a file: keep it in the environment and name the variable "
                    "with api_key_env"
                )
            raise TapelogError(
                f"{where}: [providers.{name}] has an unknown field {field!r} (known: "
                f"{', '.join(_FIELDS)})"
            )
        if isinstance(value, bool) != (expected is bool) or not isinstance(value, expected):
            kind = {str: "a string", bool: "true or false", int: "an integer"}[expected]
            raise TapelogError(f"{where}: [providers.{name}] {field} must be {kind}")
        kwargs[field] = value
    if "family" not in kwargs:
        raise TapelogError(f'{where}: [providers.{name}] needs family = "openai" or "anthropic"')
    return kwargs


def parse_providers(data: Mapping[str, Any], source: str) -> list[dict[str, Any]]:
    """The entries of a parsed providers file, each as ``register_provider``
    keyword arguments (with ``name``), checked but not yet registered."""
    extra = [k for k in data if k != "providers"]
    if extra:
        raise TapelogError(
            f"{source}: unknown top-level key {extra[0]!r}; put each provider in a "
            "[providers.NAME] table"
        )
    providers = data.get("providers", {})
    if not isinstance(providers, Mapping):
        raise TapelogError(f"{source}: 'providers' must be a table of [providers.NAME] tables")
    entries = []
    for name, table in providers.items():
        check_name(name, source)
        entries.append({"name": name, **_entry(name, table, source)})
    return entries


def load_providers(path: str | os.PathLike[str]) -> tuple[ProviderSpec, ...]:
    """Register every provider of the TOML file at ``path``; the registered specs.

    All entries are validated (and built) before the first is registered, so a
    bad file registers nothing.
    """
    source = f"providers file {os.fspath(path)}"
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise TapelogError(f"{source}: cannot be read ({exc.strerror or exc})") from None
    if len(raw) > _MAX_BYTES:
        raise TapelogError(f"{source}: is larger than 1 MiB; is it the right file?")
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise TapelogError(f"{source}: is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise TapelogError(f"{source}: is not valid TOML ({exc})") from None
    specs = []
    for entry in parse_providers(data, source):  # all checked first: a bad file registers nothing
        try:
            specs.append(build_spec(**entry))
        except TapelogError as exc:
            raise TapelogError(f"{source}: {exc}") from None
    return tuple(register_spec(spec, replace=True) for spec in specs)
