"""What an agent talks to, from a model string or from an explicit client and config.

``Agent("openai:gpt-4.1-mini")`` is the short form of a config, a client and a
session: the provider comes before the first colon (a model name may hold
colons itself, as Ollama's tags do), the model after it, and ``"emulator"``
alone is the in-process emulator, offline. The key is read from the
environment at once, so a missing one is a sentence now rather than an
error at the first send; it is never logged. The explicit form (a client
and its ``config=``) keeps working; the two do not mix.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from tapelog._errors import HeaderError, TapelogError
from tapelog.llm import ProviderClient, make_client
from tapelog.llm._api import default_model, provider_spec, resolve_api_key
from tapelog.log._api import LlmCallConfig, Session

__all__ = ["config_for_model", "resolve_target"]

_FORM = "write it as 'provider:model', e.g. 'openai:gpt-4.1-mini', or 'emulator'"


def config_for_model(model: str) -> LlmCallConfig:
    """The call config a model string names (a one-sentence error if it names none)."""
    if not isinstance(model, str) or not model.strip():
        raise TapelogError(f"the model string is empty; {_FORM}")
    provider, sep, name = model.partition(":")
    try:
        provider_spec(provider)
    except HeaderError:
        raise TapelogError(
            f"{provider!r} is not a known provider (in model string {model!r}); {_FORM}, "
            "with a provider from docs/providers.md or one you registered"
        ) from None
    if not sep:  # a provider alone: its default model, if it has one
        name = default_model(provider) or ""
    if not name:
        raise TapelogError(f"the model string {model!r} names no model; {_FORM}")
    return LlmCallConfig(provider=provider, model=name)


def _client_for(config: LlmCallConfig, env: Mapping[str, str]) -> ProviderClient:
    spec = provider_spec(config.provider)
    # The check the first send makes, made now: one sentence naming the variable.
    resolve_api_key(spec.name, spec.api_key_env, env, required=spec.key_required)
    return make_client(config)


def resolve_target(
    session: Session | str | None,
    client: ProviderClient | None,
    config: LlmCallConfig | None,
    model: str | None,
) -> tuple[Session, ProviderClient, LlmCallConfig]:
    """The session, client and config an :class:`Agent` runs with.

    ``session`` may be the model string itself (``Agent("emulator")``): the
    agent then gets a new session.
    """
    if isinstance(session, str):
        if model is not None:
            raise TypeError("give the model string once: Agent('provider:model') or model=...")
        session, model = None, session
    if model is not None:
        if config is not None or client is not None:
            raise TypeError(
                "give a model string or a client with its config=, not both "
                "(the model string makes the client and the config)"
            )
        config = config_for_model(model)
        client = _client_for(config, os.environ)
    elif client is None or config is None:
        raise TypeError(
            "an Agent needs a model string (Agent('openai:gpt-4.1-mini')) or a client "
            "with its config (Agent(session, client, config=...))"
        )
    return session if session is not None else Session(), client, config
