"""Shared set-up for the commands that run an agent: store, session, provider.

Provider choice: ``--provider``, else ``$TAPELOG_PROVIDER``, else (when
resuming) the provider the session last used, else ``compatible`` when a
``--base-url`` is given, else the offline emulator, which the command says out
loud. The emulator runs in-process; its cache state lives
as long as the process. A provider is built in, a preset or registered by a
providers file (``cli._providers``); its config is completed with its wire
identity before anything is logged, and its context window, when registered,
turns on automatic compaction.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

import click
import httpx

from tapelog.agent import CompactionPolicy
from tapelog.cli._stores import store_label
from tapelog.cli._terminal import terminal_text
from tapelog.emulator import Emulator
from tapelog.llm import ProviderClient, make_client
from tapelog.llm._api import (
    complete_config,
    default_model,
    known_providers,
    provider_spec,
    resolve_api_key,
)
from tapelog.log._api import LlmCallConfig, Session
from tapelog.store import Reservation, SessionStore, SessionWriter
from tapelog.store._api import validate_session_id

__all__ = [
    "ProviderSetup",
    "check_api_key",
    "open_session",
    "resolve_provider",
    "say_what_was_created",
]


def open_session(
    store: SessionStore, session_id: str | None, *, accept_undigested: bool = False
) -> tuple[Session, SessionWriter | None, Reservation | None]:
    """Resume ``session_id`` when it is stored (with its writer), else a new
    in-memory session (writer ``None``: the caller stores it once ready, with
    ``store.create(session, reservation=...)``).

    A new id is reserved at once (its write lock taken), so a second process
    starting the same new id meanwhile is refused as "open for writing by
    another process (pid N)". A resume refuses events after the last digest
    unless ``accept_undigested`` (``SessionStore.open``); what it had to
    tolerate is printed, one line each."""
    reservation = None
    if session_id is not None:
        validate_session_id(session_id)
        reservation = store.reserve(session_id)
        if reservation is None:
            session, writer = store.open(session_id, accept_undigested=accept_undigested)
            for warning in writer.warnings:
                click.echo(f"warning: {terminal_text(warning)}", err=True)
            return session, writer, None
    return Session(session_id, cwd=os.getcwd()), None, reservation


def say_what_was_created(store: SessionStore, session_id: str | None, *, new_store: bool) -> None:
    """No silent surprises: a mistyped ``--session`` or ``--store`` starts afresh, and says so."""
    if new_store:
        click.echo(f"note: created the store {terminal_text(store_label(store))}", err=True)
    if session_id is not None:
        click.echo(
            f"note: no session {terminal_text(session_id)} in the store: started it as a "
            "new session",
            err=True,
        )


@dataclass
class ProviderSetup:
    """A client ready to stream, plus what the user should be told about it."""

    client: ProviderClient
    config: LlmCallConfig
    emulator: Emulator | None
    http: httpx.AsyncClient | None
    compaction: CompactionPolicy | None = None
    """Automatic compaction at the provider's registered context window, if any."""

    async def aclose(self) -> None:
        if self.http is not None:
            await self.http.aclose()


def resolve_provider(
    *,
    provider: str | None,
    model: str | None,
    base_url: str | None,
    session: Session,
    quiet: bool = False,
) -> ProviderSetup:
    """Pick provider, model and client (see the module docstring for the order)."""
    folded = session.header.config if session.header is not None else None
    name = provider or os.environ.get("TAPELOG_PROVIDER") or (folded.provider if folded else None)
    if name is None and base_url is not None:
        name = "compatible"  # a URL and no provider: any OpenAI-compatible server
    if name is None:
        name = "emulator"
        if not quiet:
            click.echo(
                "note: no provider configured (--provider or TAPELOG_PROVIDER); "
                "using the offline emulator",
                err=True,
            )
    known = known_providers()
    if name not in known:
        if provider:
            where = "--provider"
        elif os.environ.get("TAPELOG_PROVIDER"):
            where = "$TAPELOG_PROVIDER"
        else:
            where = "the session's provider (pass --provider)"
        raise click.BadParameter(
            f"{name!r} is not a known provider; use one of {', '.join(sorted(known))}, or "
            "register it in a providers file (--providers, $TAPELOG_PROVIDERS or "
            "~/.config/tapelog/providers.toml; docs/providers.md).",
            param_hint=where,
        )
    if model is None:
        model = folded.model if folded is not None and folded.provider == name else None
    if model is None:
        model = default_model(name)
    if model is None:
        raise click.UsageError(f"provider {name!r} has no default model; pass --model")
    if folded is not None and folded.provider == name and folded.model == model:
        config = folded
    else:
        config = complete_config(LlmCallConfig(provider=name, model=model))
    window = known[name].context_window
    compaction = CompactionPolicy(context_window=window) if window is not None else None
    emulator: Emulator | None = None
    http: httpx.AsyncClient | None = None
    if name == "emulator" and base_url is None:
        emulator = Emulator()
        http = httpx.AsyncClient(transport=emulator.transport(), timeout=60.0)
        client = make_client(config, http_client=http)
    else:
        client = make_client(config, base_url=base_url)
    return ProviderSetup(
        client=client, config=config, emulator=emulator, http=http, compaction=compaction
    )


def check_api_key(config: LlmCallConfig, env: Mapping[str, str] | None = None) -> None:
    """Raise the client's own :class:`~tapelog.ProviderError` now, before any
    request, if ``config.provider`` needs an API key that is missing or unusable.

    The key is read from the environment as the client reads it at send time;
    it is only checked here, never kept.
    """
    spec = provider_spec(config.provider)
    resolve_api_key(
        spec.name, spec.api_key_env, os.environ if env is None else env, required=spec.key_required
    )
