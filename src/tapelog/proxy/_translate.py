"""Client body -> the request header and neutral messages, with the exactness check.

The rule (docs/proxy.md): a request is forwarded only if the body rebuilt from
the log says to the model exactly what the client's body says. Translation
builds the header (config, system prompt, tools) and the neutral messages,
then sends each back through the upstream's wire and compares the result with
the client's in normal form (``_normal``); any difference is a 400 naming the
field, before anything is logged. What may differ is listed in ``_normal``,
``_openai_in`` and ``_anthropic_in``: whitespace, key order outside schemas
and tool inputs, ``null`` versus absent, string versus one-text-block content,
the proxy's own ``stream`` / ``stream_options``, the spelling of the token
limit, Anthropic ``cache_control`` markers.

Messages are translated one by one and the result is cached by a digest of
the message's canonical bytes (two generations of at most ``cache_size``
entries each), so a new message costs one encode, one hash and one lookup
when it was seen before, and a full translation otherwise. A request that
extends a recent one costs less still: the canonical bytes of its whole
message list (one ``orjson`` encode, in C) start with the bytes of that
earlier list, so its messages up to there are the same values (same types,
same key order) and their translation, keys, prefix chain and tool-call
check are taken from it whole (``remember``); only the messages after it
go through the per-message path. A JSON value's bytes end where its closing
brace is, so a byte prefix that ends at a message's end names exactly those
messages. When the body's bytes already showed what a request extends
(``_body_prefix``), only its new messages are encoded, and the list's bytes
are kept as parts shared with the request it extends (``Messages.listed``):
at 10,000 messages a step copies what is new, not 3 MB of history.

On the OpenAI wire, which reasoning the client sends back
(``reasoning_content``) is a wire option of the log's config
(``config.wire.reasoning_send_back``): each assistant message says which
send-back rules reproduce it, and the header takes one that reproduces all of
them, preferring the one the session already uses, then ``never`` (most
clients send no reasoning back, and a session that starts with the rule its
client keeps needs no header change later), then the dialect's default.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from hashlib import blake2b
from typing import Any

from tapelog._errors import EventError, HeaderError, JsonValueError, ProxyError
from tapelog.cache._api import wire_profile_named
from tapelog.llm._api import (
    SEGMENT_BYTES,
    AnthropicWire,
    OpenAIWire,
    ResponsesWire,
    role_shape,
    wire_for,
)
from tapelog.log._api import (
    EpochHeader,
    FrozenDict,
    FrozenList,
    encode_trusted,
    freeze,
    header_from_json,
)
from tapelog.proxy._anthropic_in import anthropic_top, parse_anthropic, translate_anthropic
from tapelog.proxy._keys import extend_chain
from tapelog.proxy._normal import first_difference
from tapelog.proxy._openai_in import openai_top, parse_openai, translate_openai
from tapelog.proxy._responses_in import parse_responses, responses_top, translate_responses
from tapelog.proxy._types import (
    ALL_RULES,
    EVERY_RULE,
    NOT_A_MESSAGE,
    ClientRequest,
    Family,
    Translated,
    is_message,
)
from tapelog.proxy._upstream import Upstream
from tapelog.request import LlmRequest

__all__ = ["Messages", "Translator"]

_TOKEN_FIELDS = ("max_tokens", "max_completion_tokens")
_RECENT = 16
"""How many recent requests' message lists a translator keeps to be extended
(one per conversation a client runs at once through the proxy)."""
_AFTER_MESSAGE = (ord(","), ord("]"))


@dataclass(frozen=True, slots=True)
class Messages:
    """A request's history in the log's terms: the neutral messages, their
    loose keys, the client message each came from, and the reasoning
    send-back rules that reproduce every one of them."""

    neutral: list[FrozenDict]
    keys: list[bytes]
    origin: list[int]
    rules: frozenset[str]
    chain: list[bytes]
    """The digest of every prefix of ``keys`` (``_keys.chain_of``)."""
    known: int = 0
    """How many leading neutral messages come from a remembered request whose
    tool calls were checked (``unanswered_calls`` may start there)."""
    listed: tuple[bytes, ...] = ()
    """The canonical bytes of the client's raw message list without its
    brackets, as parts (:func:`_grown`): a request that extends this one
    shares these parts as the same objects and adds its new messages' bytes,
    so the history's bytes are never copied again (``encoded`` joins them)."""
    count: int = 0
    """How many raw client messages these are."""
    label: str = "messages"
    """What the client calls its list (``input`` on the Responses API, whose
    ``origin`` numbers input items, not the proxy's groups of them)."""
    grouped: Any = None
    """The Responses API: the request's grouping of its input items, which a
    request extending this one grows (``ClientRequest.grouped``)."""

    @property
    def encoded(self) -> bytes:
        """The canonical bytes of the client's raw message list (joined now)."""
        return b"[" + b"".join(self.listed) + b"]"

    def leads(self, encoded: bytes) -> bool:
        """Whether ``encoded`` (a message list's canonical bytes) starts with
        these messages, message for message (compared part by part, unjoined)."""
        if not self.count or encoded[:1] != b"[":
            return False
        at = 1
        for part in self.listed:
            if not encoded.startswith(part, at):
                return False
            at += len(part)
        return len(encoded) > at and encoded[at] in _AFTER_MESSAGE

    @property
    def size(self) -> int:
        """How many bytes ``listed`` holds."""
        return sum(map(len, self.listed))

    def where(self, index: int, offset: int) -> str:
        """The client's name for neutral message ``index``."""
        if index >= len(self.origin):
            return f"{self.label}[{(self.origin[-1] if self.origin else -1) + 1 + offset}]"
        return f"{self.label}[{self.origin[index] + offset}]"


def _grown(listed: tuple[bytes, ...], more: bytes) -> tuple[bytes, ...]:
    """The parts of a list's inside (``listed``, see :attr:`Messages.listed`)
    with more items (``more``, a list's canonical bytes).

    The parts before the last are kept as they are (the same objects); the
    new bytes join the last part while it is under :data:`SEGMENT_BYTES`, and
    start a part of their own after that. So a step copies what is new plus at
    most one segment, and a long history is a few dozen parts.
    """
    inner = more[1:-1]
    if not inner:
        return listed
    if not listed:
        return (inner,)
    last = listed[-1]
    if len(last) < SEGMENT_BYTES:
        return (*listed[:-1], b"".join((last, b",", inner)))
    return (*listed, b"," + inner)


class Translator:
    """Translation for one upstream, with a cache of translated messages."""

    def __init__(self, upstream: Upstream, *, cache_size: int = 100_000) -> None:
        self.upstream = upstream
        self.dialect = upstream.dialect or "compatible"
        # The upstream wire's facts; its reasoning send-back default is the one
        # the log's rebuild uses too (the same profile, through the wire).
        self.profile = wire_profile_named(self.dialect)
        # How the upstream's wire spells the token limit (a client spelling it
        # the other way gets ``config.wire.token_field``).
        self._token_field = "max_tokens"
        if upstream.family != "anthropic":
            wire = OpenAIWire(dialect=self.dialect)  # type: ignore[arg-type]
            self._token_field = wire.token_field_name
        self.cache_size = cache_size
        self._current: dict[bytes, Translated] = {}
        self._previous: dict[bytes, Translated] = {}
        self._recent: list[Messages] = []  # newest last, at most ``_RECENT``
        self._top: tuple[tuple[str, bytes], dict[str, Any]] | None = None  # check_header's

    def parse(
        self,
        family: Family,
        body: Mapping[str, Any],
        headers: Mapping[str, str] | None = None,
        query: str = "",
        extends: Messages | None = None,
    ) -> ClientRequest:
        """The header part and raw messages of a client body of ``family``
        (``headers``, ``query``: the client's request headers and query string;
        ``extends``: the messages of an earlier request this body extends, as
        for :meth:`messages`, whose grouping of Responses input items is grown)."""
        if family == "responses":
            return parse_responses(body, extends.grouped if extends is not None else None)
        if family == "anthropic":
            return parse_anthropic(body, headers, query)
        return parse_openai(body)

    def _miss(self, key: bytes, family: Family, message: Any, where: str) -> Translated:
        """Translate a message not in the cache, and keep it there."""
        if family == "anthropic":
            found = translate_anthropic(message, where)
        elif family == "responses":
            found = translate_responses(message, where)
        else:
            found = translate_openai(message, where, dialect=self.dialect)
        if len(self._current) >= self.cache_size:
            self._previous, self._current = self._current, {}
        self._current[key] = found
        return found

    def remember(self, messages: Messages) -> None:
        """Keep a request's messages, whose tool calls passed the check, as a
        prefix later requests may extend (the ``_RECENT`` newest are kept)."""
        recent = self._recent
        for i, kept in enumerate(recent):
            if kept.count == messages.count and kept.listed == messages.listed:
                del recent[i]
                break
        recent.append(messages)
        if len(recent) > _RECENT:
            del recent[0]

    def _known(self, encoded: bytes) -> Messages | None:
        """The longest remembered message list that ``encoded`` (a message
        list's canonical bytes) starts with, message for message."""
        best: Messages | None = None
        for kept in self._recent:
            if (best is None or kept.size > best.size) and kept.leads(encoded):
                best = kept
        return best

    def messages(self, request: ClientRequest, *, extends: Messages | None = None) -> Messages:
        """Every client message translated (from the cache when seen before).

        The hot path of a long conversation: one encode of the message list;
        then, after the longest remembered prefix, per message one encode,
        one lookup and a few appends (run it with the garbage collector paused).
        ``extends``: the messages of an earlier request whose raw messages
        this request's start with, as its body's bytes showed
        (``_body_prefix``); then only the new messages are encoded.
        """
        raw = request.messages
        if request.family == "responses" and not (request.grouped and request.grouped.grown):
            extends = None  # the groups were made again: the earlier ones may have changed
        known = extends if extends is not None and 0 < extends.count <= len(raw) else None
        if known is not None:
            listed = _grown(known.listed, encode_trusted(raw[known.count :]))
        else:
            encoded = encode_trusted(raw)
            known = self._known(encoded)
            listed = _grown((), encoded)
        rules = EVERY_RULE
        start = 0
        previous_role: Any = None
        if known is not None:
            neutral = list(known.neutral)
            keys = list(known.keys)
            origin = list(known.origin)
            chain = list(known.chain)
            rules = known.rules
            start = known.count
            previous_role = raw[start - 1].get("role")
        else:
            neutral, keys, origin, chain = [], [], [], []
        checked = len(neutral)
        named = len(origin)
        offset = request.offset
        family = request.family
        anthropic = family == "anthropic"
        current, previous = self._current, self._previous
        for i in range(start, len(raw)):
            message = raw[i]
            if not is_message(message):
                raise ProxyError(NOT_A_MESSAGE, kind="invalid_request_error")
            key = blake2b(encode_trusted(message), digest_size=16).digest()
            done = current.get(key)
            if done is None:
                done = previous.get(key)
                if done is not None:
                    current[key] = done
                else:
                    done = self._miss(key, family, message, f"messages[{i + offset}]")
                    current, previous = self._current, self._previous
            if done.rules is not EVERY_RULE:
                rules = rules & done.rules
                if not rules:
                    raise ProxyError(
                        f"messages[{i + offset}] sends back reasoning (reasoning_content) "
                        "differently from an earlier assistant message; the log's wire sends it "
                        "back by one rule for the whole request"
                    )
            found = done.messages
            if anthropic:
                role = message.get("role")
                if role == previous_role:
                    found = _alone(found)
                previous_role = role
            if len(found) == 1:
                neutral.append(found[0])
                keys.append(done.keys[0])
                origin.append(i)
            else:
                neutral.extend(found)
                keys.extend(done.keys)
                origin.extend([i] * len(found))
        extend_chain(chain, keys)
        label = "messages"
        if family == "responses":  # name the client's input items, not their groups
            origin[named:] = [raw[o]["at"] for o in origin[named:]]
            label = "input"
        return Messages(
            label=label,
            neutral=neutral,
            keys=keys,
            origin=origin,
            rules=rules,
            chain=chain,
            known=checked,
            listed=listed,
            count=len(raw),
            grouped=request.grouped,
        )

    def header(
        self, request: ClientRequest, rules: frozenset[str], current: EpochHeader | None
    ) -> EpochHeader:
        """The request header: the client's model, options, extras, system and
        tools, and (OpenAI) the reasoning send-back rule; checked like a logged one."""
        wire: dict[str, Any] = dict(request.wire)
        if request.family == "openai":
            wire.update(self._send_back(request.model, rules, current))
            spelled = next(
                (k for k in _TOKEN_FIELDS if request.body.get(k) is not None), self._token_field
            )
            if spelled != self._token_field:  # carried as the client spells it
                wire["token_field"] = spelled
            if isinstance(request.body.get("stop"), str):  # a string, not a list of one
                wire["stop_string"] = True
        elif request.family == "responses":
            # The client's own store (absent stays absent), on the Responses API,
            # and its input as the string it sent, when it sent one.
            wire.update({"api": "responses", "store_false": False})
            if isinstance(request.body.get("input"), str):
                wire["input_string"] = True
        try:
            config = self.upstream.config(
                model=request.model,
                **request.options,
                extras=request.extras,
                wire=wire,
                headers=request.headers,
            )
            header = EpochHeader(config=config, system=request.system, tools=request.tools)
            # Validated as a logged header is: a value of the wrong type fails here.
            return header_from_json(header.to_json())
        except (HeaderError, JsonValueError) as exc:
            raise ProxyError(f"the request cannot be represented in the log: {exc}") from None

    def for_session(
        self,
        request: ClientRequest,
        rules: frozenset[str],
        current: EpochHeader | None,
        checked: EpochHeader,
    ) -> EpochHeader:
        """The header under the session's header ``current``, given ``checked``,
        the one :meth:`header` made for ``request`` with no session (and
        :meth:`check_header` passed): the same unless the reasoning send-back
        rule the session keeps picks another (OpenAI; the only part of the
        header ``current`` decides), so a request makes its header once."""
        if request.family != "openai" or self._send_back(
            request.model, rules, current
        ) == self._send_back(request.model, rules, None):
            return checked
        return self.header(request, rules, current)

    def _send_back(
        self, model: str, rules: frozenset[str], current: EpochHeader | None
    ) -> dict[str, Any]:
        default = self.profile.send_back_for(model)
        explicit = current.config.wire.get("reasoning_send_back") if current else None
        in_force = explicit or (
            self.profile.send_back_for(current.config.model) if current else None
        )
        # Unconstrained (no assistant message yet), "never": most clients send no
        # reasoning back, so their sessions keep one rule from the first request.
        rule = next(r for r in (in_force, "never", default, *ALL_RULES) if r in rules)
        if rule != default or explicit == rule:
            return {"reasoning_send_back": rule}
        return {}

    def check_header(self, request: ClientRequest, header: EpochHeader) -> None:
        """Refuse unless the header says what the body's non-history part says.

        What the header rebuilds to is kept for the last header (by its
        canonical bytes): a conversation's requests share one header, so the
        wire builds it once, not on every request."""
        top = _TOPS[request.family]
        key = (request.family, header.canonical_bytes())
        if self._top is not None and self._top[0] == key:
            rebuilt = self._top[1]
        else:
            wire = wire_for(header.config)
            try:
                body = wire.build_body(LlmRequest(header=header, messages=FrozenList()))
            except (HeaderError, EventError, JsonValueError) as exc:
                raise ProxyError(f"the request cannot be represented in the log: {exc}") from None
            rebuilt = top(body)
            self._top = (key, rebuilt)
        found = first_difference(top(request.body), rebuilt, "body")
        if found is not None:
            raise ProxyError(found, kind="invalid_request_error")

    def same(self, header: EpochHeader) -> Callable[[FrozenDict, FrozenDict], bool]:
        """Whether a logged message and a client's say the same to the model
        under ``header``'s wire (equal, or equal wire bytes)."""
        wire = wire_for(header.config)
        model = header.config.model
        if isinstance(wire, AnthropicWire):
            anthropic = wire

            def piece(message: FrozenDict) -> Any:
                role, blocks = anthropic.message_blocks(message)
                return role_shape(role), [b[1] for b in blocks]

        elif isinstance(wire, ResponsesWire):
            responses = wire

            def piece(message: FrozenDict) -> Any:
                return encode_trusted(responses.items(message))

        else:
            openai = wire

            def piece(message: FrozenDict) -> Any:
                return encode_trusted(openai.message(message, model=model))

        def same(logged: FrozenDict, sent: FrozenDict) -> bool:
            if logged == sent:
                return True
            try:
                return bool(piece(logged) == piece(sent))
            except (EventError, JsonValueError):
                return False

        return same


_TOPS: dict[str, Callable[[Mapping[str, Any]], dict[str, Any]]] = {
    "anthropic": anthropic_top,
    "openai": openai_top,
    "responses": responses_top,
}
"""Each client API's normal form of a body's non-history part."""


def _alone(messages: tuple[FrozenDict, ...]) -> tuple[FrozenDict, ...]:
    """A client message that follows one of its role, kept a message of its own:
    its first neutral message gets ``fields`` (empty when it has none), which
    the Anthropic wire never merges with the message before it."""
    first = messages[0]
    if "fields" in first:
        return messages
    return (freeze({**first, "fields": {}}), *messages[1:])
