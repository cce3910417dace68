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

_TOKEN_FIELD: Final[Mapping[str, str]] = {
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

_MESSAGES = object()  # placeholder for the messages array in the field list


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenAIWire:
    """The OpenAI-compatible chat completions body, for one dialect.

    ``send_back`` overrides the reasoning send-back rule for every model;
    ``None`` uses the dialect's wire profile (``tapelog.cache.WIRE_PROFILES``,
    shown as :data:`MODEL_REASONING_SEND_BACK` and
    :data:`DEFAULT_REASONING_SEND_BACK`).
    """

    dialect: OpenAIDialect = "openai"
    send_back: ReasoningSendBack | None = None
    name: str = field(init=False)

    def __post_init__(self) -> None:
        if self.dialect not in _TOKEN_FIELD:
            raise ValueError(f"unknown OpenAI dialect {self.dialect!r}")
        object.__setattr__(self, "name", self.dialect)

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
            fields.append((_TOKEN_FIELD[self.dialect], config.max_tokens))
        for key in ("temperature", "top_p", "seed"):
            value = getattr(config, key)
            if value is not None:
                fields.append((key, value))
        if config.stop:
            fields.append(("stop", list(config.stop)))
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

            history = cache.joined(seqs, request.messages, piece, scope=request.session_id)
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


def _tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    # Schema key order is the user's: a provider caches rendered tokens.
    function: dict[str, Any] = {"name": tool["name"]}
    for key, value in tool.items():
        if key != "name":
            function[key] = value
    return {"type": "function", "function": function}


def _message(wire: str, message: Mapping[str, Any], rule: str, where: str) -> dict[str, Any]:
    role = message["role"]
    content: Sequence[Mapping[str, Any]] = message["content"]
    if role == "user":
        return {"role": "user", "content": _user_content(wire, content, where)}
    if role == "assistant":
        return _assistant(wire, content, rule, where)
    if role == "tool":
        block = content[0]
        return {
            "role": "tool",
            "tool_call_id": block["tool_call_id"],
            "content": tool_result_text(block, wire, f"{where}.content[0]"),
        }
    raise refuse_block(wire, str(role), {"type": "message"}, where)


def _user_content(wire: str, content: Sequence[Mapping[str, Any]], where: str) -> Any:
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
        else:
            raise refuse_block(wire, "user", block, f"{where}.content[{i}]")
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
        elif btype not in ("text", "reasoning"):
            raise refuse_block(wire, "assistant", block, f"{where}.content[{i}]")
    text = joined_text(content, "text")
    out: dict[str, Any] = {"role": "assistant", "content": text or (None if calls else "")}
    has_reasoning = any(b["type"] == "reasoning" for b in content)
    present = rule in ("present", "present_and_tool_turns") and has_reasoning
    if present or (rule in ("tool_turns", "present_and_tool_turns") and calls):
        out["reasoning_content"] = joined_text(content, "reasoning")
    if calls:
        out["tool_calls"] = calls
    return out
