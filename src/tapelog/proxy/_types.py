"""The values translation produces, and the error a refused request gets.

A client body becomes a :class:`ClientRequest`: the non-history part (model,
system prompt, tools, options, extras: what the log's request header holds)
and the client's messages, each translated on its own into a
:class:`Translated` (one client message can be several neutral ones: an
Anthropic user message with tool results is one ``tool`` message per result,
then the rest). Translation is pure and checked: each message is sent back
through the wire that will carry it, and anything the wire would not
reproduce is a :class:`ProxyError` with status 400 that names it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, get_args

from tapelog.cache._api import ReasoningSendBack
from tapelog.log._api import FrozenDict

__all__ = [
    "ALL_RULES",
    "EVERY_RULE",
    "NOT_A_MESSAGE",
    "ClientRequest",
    "Family",
    "Translated",
    "is_message",
]

Family = Literal["openai", "anthropic", "responses"]
"""The API a client speaks: OpenAI chat completions, Anthropic Messages, or the
OpenAI Responses API (forwarded to an upstream of the ``openai`` family)."""

ALL_RULES: Final[tuple[str, ...]] = get_args(ReasoningSendBack)
"""The reasoning send-back rules of the OpenAI wire (``config.wire.reasoning_send_back``),
as the wire profiles name them (``tapelog.cache.ReasoningSendBack``)."""

EVERY_RULE: Final = frozenset(ALL_RULES)
"""The rules of a message that any of them reproduces (one shared object)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Translated:
    """One client message in the log's terms.

    ``messages`` are the neutral messages (``{"role", "content"}``) it becomes,
    in order; ``keys`` their loose keys (``_keys.loose_key``); ``rules`` the
    reasoning send-back rules under which the OpenAI wire sends back exactly
    what the client sent (every rule for a message without reasoning choices;
    always every rule on the Anthropic wire).
    """

    messages: tuple[FrozenDict, ...]
    keys: tuple[bytes, ...]
    rules: frozenset[str]


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientRequest:
    """A client's request body, parsed: the header part and the raw messages."""

    family: Family
    model: str
    system: str | Sequence[Any] | None
    tools: tuple[FrozenDict, ...]
    options: Mapping[str, Any]
    """``LlmCallConfig`` fields the body sets (``max_tokens``, ``temperature``, ...)."""
    extras: Mapping[str, Any]
    """Every other top-level field, in the client's order (sent as ``config.extras``)."""
    messages: list[Any]
    """The client's messages after any leading system message, as decoded."""
    offset: int
    """How many leading client messages went into ``system`` (OpenAI: 0 or 1)."""
    stream: bool
    body: Mapping[str, Any] = field(repr=False)
    """The whole decoded body (for the header comparison)."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """The request headers that change what the model reads (``config.headers``)."""
    wire: Mapping[str, Any] = field(default_factory=dict)
    """Wire options the client's request fixes (``config.wire``: its cache
    markers, its query string)."""
    grouped: Any = None
    """A Responses body's grouping of its items (``_responses_in.Grouped``),
    which a body extending this one grows (``None`` on the other APIs)."""


NOT_A_MESSAGE = "messages: each message must be an object with a string role"


def is_message(value: Any) -> bool:
    """Whether a client message is an object with a string role (decoded JSON
    objects are dicts: a plain isinstance, not the slower ``Mapping`` check)."""
    return isinstance(value, dict) and isinstance(value.get("role"), str)
