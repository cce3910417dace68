"""Neutral request -> OpenAI-compatible chat completions body (pure).

One serializer, three dialects: ``openai`` (api.openai.com: the token limit is
``max_completion_tokens``), ``deepseek`` (``max_tokens``, reasoning sent back
as ``reasoning_content`` by a per-model rule) and ``compatible`` (vLLM,
llama.cpp, Ollama, SGLang, the emulator: ``max_tokens``). Key order is fixed
here and documented in docs/providers.md, because the bytes are what an
auditor compares and what a prompt cache sees.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, Literal, get_args

from tapelog._errors import EventError
from tapelog.cache._api import ReasoningSendBack, wire_profile_named
from tapelog.llm._pieces import BodyCache, Parts, node_seq_list, object_parts
from tapelog.llm._types import LlmRequest
from tapelog.llm._wire_common import check_extras, joined_text, refuse_block, tool_result_text
from tapelog.log import encode
from tapelog.log._api import FrozenDict, encode_trusted, freeze_faithful, freeze_trusted

__all__ = [
    "DEFAULT_REASONING_SEND_BACK",
    "MODEL_REASONING_SEND_BACK",
    "OpenAIDialect",
    "OpenAIWire",
    "ReasoningSendBack",
    "TokenField",
    "empty_content",
    "no_text",
]

OpenAIDialect = Literal["openai", "deepseek", "compatible"]

DEFAULT_REASONING_SEND_BACK: Final[Mapping[str, ReasoningSendBack]] = MappingProxyType(
    {d: wire_profile_named(d).reasoning_send_back for d in get_args(OpenAIDialect)}
)
"""Each dialect's default rule, as its wire profile says (``tapelog.cache.WIRE_PROFILES``,
where the reasons are written); read at import, for display: the wire asks the profile."""

MODEL_REASONING_SEND_BACK: Final[Mapping[tuple[str, str], ReasoningSendBack]] = MappingProxyType(
    {
        (d, model): rule
        for d in get_args(OpenAIDialect)
        for model, rule in wire_profile_named(d).model_reasoning_send_back.items()
    }
)
"""The models whose rule differs from their dialect's, as the profiles say (empty today)."""

TokenField = Literal["max_tokens", "max_completion_tokens"]
"""The two spellings of the token limit (``config.wire.token_field``)."""

_TOKEN_FIELD: Final[Mapping[str, TokenField]] = {
    "openai": "max_completion_tokens",
    "deepseek": "max_tokens",
    "compatible": "max_tokens",
}

_RESERVED: Final = (
    "model",
    "messages",
    "tools",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "seed",
    "stop",
    "reasoning_effort",
    "stream",
    "stream_options",
)

_USER_ROLES: Final = frozenset({"user", "developer", "system"})
"""Roles whose content is text and parts (a developer or system message may
stand anywhere in the history: ``user/message`` ``data.role``)."""

_PART_TYPES: Final = frozenset({"text", "openai_part"})

_MESSAGES = object()  # placeholder for the messages array in the field list


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenAIWire:
    """The OpenAI-compatible chat completions body, for one dialect.

    ``token_field`` overrides the spelling of the token limit (a proxied client
    that spells it the other way is carried as it spelled it); ``stop_string``
    sends a one-sequence ``stop`` as a string (a proxied client that sent one);
    ``send_back`` overrides the reasoning send-back rule for every model;
    ``None`` uses the dialect's wire profile (``tapelog.cache.WIRE_PROFILES``,
    shown as :data:`MODEL_REASONING_SEND_BACK` and
    :data:`DEFAULT_REASONING_SEND_BACK`).
    """

    dialect: OpenAIDialect = "openai"
    send_back: ReasoningSendBack | None = None
    token_field: TokenField | None = None
    """How the token limit is spelled (``config.wire.token_field``); ``None``:
    the dialect's (``max_completion_tokens`` for ``openai``, else ``max_tokens``)."""
    stop_string: bool = False
    """Send a ``stop`` of one sequence as that string (``config.wire.stop_string``)."""
    name: str = field(init=False)

    def __post_init__(self) -> None:
        if self.dialect not in _TOKEN_FIELD:
            raise ValueError(f"unknown OpenAI dialect {self.dialect!r}")
        object.__setattr__(self, "name", self.dialect)

    @property
    def token_field_name(self) -> TokenField:
        """The member that carries ``config.max_tokens`` on this wire."""
        return self.token_field or _TOKEN_FIELD[self.dialect]

    def send_back_for(self, model: str) -> ReasoningSendBack:
        """The reasoning send-back rule in force for ``model``: the override, else
        the dialect's wire profile's (``tapelog.cache.WIRE_PROFILES``)."""
        if self.send_back is not None:
            return self.send_back
        return wire_profile_named(self.dialect).send_back_for(model)

    # --- the body ---------------------------------------------------------

    def _fields(self, request: LlmRequest) -> list[tuple[str, Any]]:
        config = request.header.config
        check_extras(config.extras, _RESERVED, self.name)
        fields: list[tuple[str, Any]] = [("model", config.model), ("messages", _MESSAGES)]
        if request.header.tools:
            fields.append(("tools", [_tool(t) for t in request.header.tools]))
        if config.max_tokens is not None:
            fields.append((self.token_field_name, config.max_tokens))
        for key in ("temperature", "top_p", "seed"):
            value = getattr(config, key)
            if value is not None:
                fields.append((key, value))
        if config.stop:
            one = self.stop_string and len(config.stop) == 1
            fields.append(("stop", config.stop[0] if one else list(config.stop)))
        if config.reasoning_effort is not None:
            fields.append(("reasoning_effort", config.reasoning_effort))
        fields.append(("stream", True))
        fields.append(("stream_options", {"include_usage": True}))
        fields.extend(config.extras.items())
        return fields

    def _system(self, request: LlmRequest) -> list[dict[str, Any]]:
        system = request.header.system
        return [{"role": "system", "content": system}] if system else []

    def message(self, message: Mapping[str, Any], *, model: str, where: str = "message") -> Any:
        """One neutral message as its wire object (frozen: it is built from the
        frozen message, so only its new containers need freezing)."""
        return freeze_trusted(_message(self.name, message, self.send_back_for(model), where))

    def build_body(self, request: LlmRequest) -> FrozenDict:
        """The body object, built in one piece (``encode`` of it == :meth:`encode_body`)."""
        model = request.header.config.model
        messages = [*self._system(request)] + [
            self.message(m, model=model, where=f"messages[{i}]")
            for i, m in enumerate(request.messages)
        ]
        body = {k: (messages if v is _MESSAGES else v) for k, v in self._fields(request)}
        out: FrozenDict = freeze_faithful(body, path="body")
        return out

    def encode_body(self, request: LlmRequest, *, cache: BodyCache | None = None) -> bytes:
        """The exact HTTP body: same request, same bytes (with or without ``cache``)."""
        return b"".join(self.encode_parts(request, cache=cache))

    def _head(self, request: LlmRequest) -> tuple[list[bytes], list[tuple[str, bytes | None]]]:
        """The encoded system message and body members (``None``: the messages)."""
        system = [encode(m) for m in self._system(request)]
        members = [
            (k, None if v is _MESSAGES else encode(v, path=f"body.{k}"))
            for k, v in self._fields(request)
        ]
        return system, members

    def encode_parts(self, request: LlmRequest, *, cache: BodyCache | None = None) -> Parts:
        """:meth:`encode_body` as the byte parts it joins (the checker compares
        them with a body without building a second one)."""
        model = request.header.config.model
        rule = self.send_back_for(model)
        seqs = node_seq_list(request.messages, request.node_seqs)

        def make(i: int) -> bytes:
            # Built only from the request's frozen (validated) messages: no second walk.
            return encode_trusted(_message(self.name, request.messages[i], rule, f"messages[{i}]"))

        history: Parts
        if cache is None:
            system, members = self._head(request)
            pieces = [make(i) for i in range(len(seqs))]
            history = [
                p for i, piece in enumerate(pieces) for p in ((b",", piece) if i else (piece,))
            ]
        else:
            cache.bind(("openai", self.dialect, rule))
            system, members = cache.head(
                request.header.canonical_bytes(), lambda: self._head(request)
            )

            def piece(i: int) -> bytes:
                return cache.piece(seqs[i], request.messages[i], lambda: make(i))

            history = cache.joined(
                seqs, request.messages, piece, scope=request.session_id, history=request.history
            )
            # The joined bytes hold every node now; the next request of the
            # session only looks up its new ones (a replace re-encodes once).
            cache.prune(seqs if request.session_id is None else ())
        items: Parts = list(_separated(system))
        if items and history:
            items.append(b",")
        messages: Parts = [b"[", *items, *history, b"]"]
        return object_parts((k, messages if v is None else v) for k, v in members)


def _separated(pieces: list[bytes]) -> list[bytes]:
    """``pieces`` with ``b","`` between them (the parts of a JSON array's inside)."""
    out: list[bytes] = []
    for piece in pieces:
        if out:
            out.append(b",")
        out.append(piece)
    return out


def _tool(tool: Mapping[str, Any]) -> Any:
    if "openai_tool" in tool:  # a tool the log keeps as the client sent it
        return tool["openai_tool"]
    # Schema key order is the user's: a provider caches rendered tokens.
    function: dict[str, Any] = {"name": tool["name"]}
    for key, value in tool.items():
        if key != "name":
            function[key] = value
    return {"type": "function", "function": function}


def _message(wire: str, message: Mapping[str, Any], rule: str, where: str) -> dict[str, Any]:
    out = _standard(wire, message, rule, where)
    fields = message.get("fields")
    if fields:
        # The client's other members (``name``, ``refusal``, ...), as it sent them;
        # ``content`` only on a message without text: its spelling of no content.
        for key, value in fields.items():
            if key in out and not (key == "content" and no_text(message)):
                raise EventError(f"{where}.fields sets {key!r}, which the {wire} wire writes")
            out[key] = value
    return out


def no_text(message: Mapping[str, Any]) -> bool:
    """Whether a message's wire ``content`` is empty: no block at all (user,
    developer, system), no text block (assistant). Such a message may carry
    the client's spelling of that emptiness (``null``, ``""``, ``[]``) as
    ``fields.content``."""
    role = message["role"]
    if role == "assistant":
        return not any(b["type"] in _PART_TYPES for b in message["content"])
    return role in _USER_ROLES and not message["content"]


def empty_content(message: Mapping[str, Any]) -> Any:
    """The ``content`` the wire writes for a message without text (:func:`no_text`):
    ``null`` beside tool calls, else ``""``."""
    calls = message["role"] == "assistant" and any(
        b["type"] == "tool_call" for b in message["content"]
    )
    return None if calls else ""


def _standard(wire: str, message: Mapping[str, Any], rule: str, where: str) -> dict[str, Any]:
    role = message["role"]
    content: Sequence[Mapping[str, Any]] = message["content"]
    if role in _USER_ROLES:
        return {"role": role, "content": _user_content(wire, content, where, role)}
    if role == "assistant":
        return _assistant(wire, content, rule, where)
    if role == "tool":
        block = content[0]
        result = block["content"]
        if isinstance(result, list) and any(p["type"] == "openai_part" for p in result):
            # Parts the client sent go back as those parts.
            text: Any = _user_content(wire, result, f"{where}.content[0]", "tool")
            if isinstance(text, str):
                text = [{"type": "text", "text": text}]
        else:
            text = tool_result_text(block, wire, f"{where}.content[0]")
        return {"role": "tool", "tool_call_id": block["tool_call_id"], "content": text}
    raise refuse_block(wire, str(role), {"type": "message"}, where)


def _user_content(
    wire: str, content: Sequence[Mapping[str, Any]], where: str, role: str = "user"
) -> Any:
    if not content:
        return ""
    if len(content) == 1 and content[0]["type"] == "text":
        return content[0]["text"]
    parts: list[dict[str, Any]] = []
    for i, block in enumerate(content):
        if block["type"] == "text":
            parts.append({"type": "text", "text": block["text"]})
        elif block["type"] == "image":
            url = block.get("url")
            if url is None:
                url = f"data:{block['media_type']};base64,{block['data']}"
            parts.append({"type": "image_url", "image_url": {"url": url}})
        elif block["type"] == "openai_part":
            parts.append(block["part"])  # carried as the client sent it
        else:
            raise refuse_block(wire, role, block, f"{where}.content[{i}]")
    return parts


def _assistant(
    wire: str, content: Sequence[Mapping[str, Any]], rule: str, where: str
) -> dict[str, Any]:
    calls: list[dict[str, Any]] = []
    for i, block in enumerate(content):
        btype = block["type"]
        if btype == "tool_call":
            calls.append(
                {
                    "id": block["id"],
                    "type": "function",
                    # arguments go back verbatim: the log's string is what the model wrote.
                    "function": {"name": block["name"], "arguments": block["arguments"]},
                }
            )
        elif btype not in ("text", "reasoning", "openai_part"):
            raise refuse_block(wire, "assistant", block, f"{where}.content[{i}]")
    text: Any = joined_text(content, "text")
    if any(b["type"] == "openai_part" for b in content):
        # Content the client sent as a list of parts goes back as that list.
        text = [
            b["part"] if b["type"] == "openai_part" else {"type": "text", "text": b["text"]}
            for b in content
            if b["type"] in _PART_TYPES
        ]
    out: dict[str, Any] = {"role": "assistant", "content": text or (None if calls else "")}
    # (``empty_content`` names that default for the proxy.)
    has_reasoning = any(b["type"] == "reasoning" for b in content)
    present = rule in ("present", "present_and_tool_turns") and has_reasoning
    if present or (rule in ("tool_turns", "present_and_tool_turns") and calls):
        out["reasoning_content"] = joined_text(content, "reasoning")
    if calls:
        out["tool_calls"] = calls
    return out
