"""Providers for the command line: the providers file, ``--providers``, key variables as secrets.

Every command first registers the providers of ``$TAPELOG_PROVIDERS`` (a TOML
file that must exist), else of ``$XDG_CONFIG_HOME/tapelog/providers.toml``
(``~/.config/...``) when that file exists; ``run`` and ``chat`` also take
``--providers FILE``. Nothing else needs the file: a log records the wire of
every provider it used, so ``requests``, ``verify``, ``cache`` and ``report``
rebuild it without one (the cache audit then assumes the default cache facts
for a provider it does not know). Format: docs/providers.md.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, TypeVar

import click

from tapelog.llm import load_providers
from tapelog.llm._api import known_providers
from tapelog.log import register_secret

__all__ = [
    "PROVIDERS_ENV",
    "default_providers_path",
    "load_cli_providers",
    "providers_option",
    "register_key_secrets",
]

PROVIDERS_ENV: Final = "TAPELOG_PROVIDERS"

F = TypeVar("F", bound=Callable[..., Any])


def default_providers_path() -> Path:
    """``$XDG_CONFIG_HOME/tapelog/providers.toml``, else ``~/.config/tapelog/providers.toml``."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "tapelog" / "providers.toml"


def register_key_secrets() -> None:
    """Every known provider's key, if set, is a secret from the start, so
    whatever a command prints or logs is redacted even before a client reads
    one (e.g. ``show`` of a log written by an older version)."""
    for spec in known_providers().values():
        if spec.api_key_env:
            register_secret(os.environ.get(spec.api_key_env))


def load_cli_providers() -> None:
    """Register the providers file of the environment (see the module
    docstring), then the key variables of every known provider as secrets."""
    named = os.environ.get(PROVIDERS_ENV)
    if named:
        load_providers(named)  # named explicitly: a missing file is an error
    else:
        path = default_providers_path()
        if path.is_file():
            load_providers(path)
    register_key_secrets()


def _load_option(ctx: click.Context, param: click.Parameter, value: Any) -> None:
    if value is not None:
        load_providers(value)  # a TapelogError is one line (cli._common.DebugGroup)
        register_key_secrets()


def providers_option(func: F) -> F:
    """``--providers FILE``: register the providers of a TOML file before the command runs."""
    option = click.option(
        "--providers",
        metavar="FILE",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        expose_value=False,
        callback=_load_option,
        help=f"Register the providers of a TOML file (also ${PROVIDERS_ENV}; docs/providers.md).",
    )
    return option(func)
