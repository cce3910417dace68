"""Neutral request -> OpenAI Responses API body (``POST /v1/responses``; pure).

The third wire family beside chat completions and Anthropic Messages. A
neutral message becomes zero or more *input items* (docs/providers.md, "The
Responses wire"):

* a ``user`` / ``developer`` / ``system`` message -> one ``message`` item
  (``input_text`` / ``input_image`` parts), with any opaque ``item`` block
  sent as its own item in place;
* an ``assistant`` message -> its blocks in order: a Responses reasoning
  block (one with a ``summary`` list) is the ``reasoning`` item as the model
  returned it (``id``, ``summary``, ``encrypted_content`` ... verbatim), a
  text block is a ``message`` item with one ``output_text`` part, a tool
  call is a ``function_call`` item, an ``item`` block is sent as given;
* a ``tool`` message -> a ``function_call_output`` item.

Reasoning without a ``summary`` came from another wire (no item the Responses
API would accept) and is not sent, as the Anthropic wire drops unsigned
reasoning. The loop sends the whole input with ``store: false``: the log is
the truth, not state kept by the provider. Key order is fixed here, so the
same log gives the same bytes (what an auditor compares, what a prompt cache
sees); each message's items are encoded once per surface node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from tapelog._errors import HeaderError
from tapelog.llm._pieces import BodyCache, Parts, node_seq_list, object_parts
from tapelog.llm._types import LlmRequest
from tapelog.llm._wire_common import check_extras, refuse_block
from tapelog.log import encode
from tapelog.log._api import FrozenDict, freeze_faithful

__all__ = ["ENCRYPTED_REASONING", "ResponsesWire", "input_items"]

ENCRYPTED_REASONING: Final = "reasoning.encrypted_content"
"""The ``include`` value that makes the API return reasoning as an opaque
``encrypted_content`` the next request sends back (needed with ``store: false``)."""

_RESERVED: Final = (
    "model",
    "instructions",
    "input",
    "tools",
    "max_output_tokens",
    "temperature",
    "top_p",
    "stream",
    # Server-side state: the log is the truth, so the whole input is always sent.
    # (``previous_response_id`` is allowed as an extra: a proxied client's request
    # is carried as it was sent; the log says where the earlier part of its
    # prompt is, docs/format.md.)
    "conversation",
)

_INPUT = object()  # placeholder for the input array in the field list


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponsesWire:
    """The OpenAI Responses API body (``config.wire.api = "responses"``).

    ``dialect`` is the provider's OpenAI-family dialect; the body does not
    depend on it today (it keys the piece cache). ``store_false`` (the
    loop's rule) sends ``store: false`` when the extras do not name ``store``;
    off (``config.wire.store_false = false``), the body has a ``store`` only
    if the extras give one: how the proxy carries a client that sent none.
    ``input_string`` (``config.wire.input_string = true``, how the proxy
    carries a client that sent ``input`` as a string) sends an input that is
    one user message of one text block as that string, as the client did;
    any other input is the item list. ``held`` (``config.wire.held``, how the
    proxy carries a request that continues a logged response by
    ``previous_response_id``) is how many leading messages of the history the
    provider holds already: the input is the messages after them.
    """

    dialect: str = "openai"
    store_false: bool = True
    input_string: bool = False
    held: int = 0
    name: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", "responses")

    # --- the body ---------------------------------------------------------

    def _fields(self, request: LlmRequest) -> list[tuple[str, Any]]:
        header = request.header
        config = header.config
        extras = config.extras
        check_extras(extras, _RESERVED, self.name)
        for key, hint in (("seed", "no seed"), ("stop", "no stop sequences")):
            if getattr(config, key):
                raise HeaderError(
                    f"config.{key} is set, but the Responses API has {hint}: leave it unset "
                    "for the responses wire."
                )
        if config.reasoning_effort is not None and "reasoning" in extras:
            raise HeaderError(
                "config.reasoning_effort and config.extras.reasoning are both set; the "
                "responses wire sends one reasoning object: put the effort in the extra."
            )
        fields: list[tuple[str, Any]] = [("model", config.model)]
        if header.system:
            fields.append(("instructions", header.system))
        fields.append(("input", _INPUT))
        if header.tools:
            fields.append(("tools", [_tool(t) for t in header.tools]))
        if config.max_tokens is not None:
            fields.append(("max_output_tokens", config.max_tokens))
        for key in ("temperature", "top_p"):
            value = getattr(config, key)
            if value is not None:
                fields.append((key, value))
        if config.reasoning_effort is not None:
            fields.append(("reasoning", {"effort": config.reasoning_effort}))
            if "include" not in extras:
                # store false: reasoning comes back only encrypted, in the next input.
                fields.append(("include", [ENCRYPTED_REASONING]))
        if self.store_false and "store" not in extras:
            fields.append(("store", False))
        fields.append(("stream", True))
        fields.extend(extras.items())
        return fields

    def items(self, message: Mapping[str, Any], *, where: str = "message") -> list[Any]:
        """One neutral message as its input items (frozen)."""
        return [freeze_faithful(item, path=where) for item in input_items(message, where)]

    def _string_input(self, request: LlmRequest) -> str | None:
        """The input as the client's string, when ``input_string`` is on and the
        input is what a string stands for: one user message of one text block."""
        if not self.input_string or len(request.messages) != self.held + 1:
            return None
        message = request.messages[self.held]
        content = message.get("content")
        if (
            set(message) == {"role", "content"}
            and message["role"] == "user"
            and isinstance(content, Sequence)
            and len(content) == 1
            and set(content[0]) == {"type", "text"}
            and content[0]["type"] == "text"
        ):
            text: str = content[0]["text"]
            return text
        return None

    def build_body(self, request: LlmRequest) -> FrozenDict:
        """The body object, built in one piece (``encode`` of it == :meth:`encode_body`)."""
        text = self._string_input(request)
        items: Any = text
        if text is None:
            items = [
                item
                for i, m in enumerate(request.messages[self.held :], self.held)
                for item in input_items(m, f"messages[{i}]")
            ]
        body = {k: (items if v is _INPUT else v) for k, v in self._fields(request)}
        out: FrozenDict = freeze_faithful(body, path="body")
        return out

    def encode_body(self, request: LlmRequest, *, cache: BodyCache | None = None) -> bytes:
        """The exact HTTP body: same request, same bytes (with or without ``cache``)."""
        return b"".join(self.encode_parts(request, cache=cache))

    def _members(self, request: LlmRequest) -> list[tuple[str, bytes | None]]:
        """The encoded body members (``None``: the input array)."""
        return [
            (k, None if v is _INPUT else encode(v, path=f"body.{k}"))
            for k, v in self._fields(request)
        ]

    def encode_parts(self, request: LlmRequest, *, cache: BodyCache | None = None) -> Parts:
        """:meth:`encode_body` as the byte parts it joins."""
        text = self._string_input(request)
        if text is not None:  # one short message: nothing worth caching
            string = encode(text, path="body.input")
            return object_parts(
                (k, [string] if v is None else v) for k, v in self._members(request)
            )
        held = self.held
        # (No copy of the history when the provider holds none of it: the usual case.)
        messages = request.messages[held:] if held else request.messages
        seqs = node_seq_list(request.messages, request.node_seqs)
        seqs = seqs[held:] if held else seqs

        def make(i: int) -> bytes:
            # A message's items, comma-separated: the piece of its node (may be empty).
            where = f"messages[{held + i}]"
            items = input_items(messages[i], where)
            return b",".join(encode(item, path=where) for item in items)

        history: Parts
        if cache is None:
            members = self._members(request)
            history = [b",".join(p for p in (make(i) for i in range(len(seqs))) if p)]
        else:
            cache.bind(("responses", self.dialect, self.store_false, self.input_string, held))
            members = cache.head(request.header.canonical_bytes(), lambda: self._members(request))

            def piece(i: int) -> bytes:
                return cache.piece(seqs[i], messages[i], lambda: make(i))

            history = cache.joined(
                seqs, messages, piece, scope=request.session_id, history=request.history
            )
            cache.prune(seqs if request.session_id is None else ())
        items: Parts = [b"[", *history, b"]"]
        return object_parts((k, items if v is None else v) for k, v in members)


def _tool(tool: Mapping[str, Any]) -> Any:
    """A header tool as a Responses tool.

    A tool with ``builtin`` is a built-in tool (``{"type": "web_search"}``...)
    sent as that object; one with its own ``type`` (a function tool carried
    in the client's key order, a ``custom`` tool) is sent as given; any other
    is a function tool, ``{"type": "function", **tool}`` in the user's key order.
    """
    builtin = tool.get("builtin")
    if builtin is not None:
        return builtin
    if "type" in tool:
        return tool
    return {"type": "function", **tool}


def input_items(message: Mapping[str, Any], where: str) -> list[Any]:
    """The input items of one neutral message, in order (see the module docstring)."""
    role = message["role"]
    content: Sequence[Mapping[str, Any]] = message["content"]
    if role == "assistant":
        return _assistant(content, where)
    if role == "tool":
        return [_tool_output(content[0], f"{where}.content[0]")]
    if role in ("user", "developer", "system"):
        return _said(role, content, message.get("fields"), where)
    raise refuse_block("responses", str(role), {"type": "message"}, where)


def _said(role: str, content: Sequence[Mapping[str, Any]], fields: Any, where: str) -> list[Any]:
    """A user/developer/system message: its parts as one ``message`` item, opaque
    ``item`` blocks as their own items where they stand."""
    out: list[Any] = []
    parts: list[Any] = []

    def flush() -> None:
        if parts:
            item: dict[str, Any] = {"type": "message", "role": role, "content": list(parts)}
            if fields:
                item.update((k, v) for k, v in fields.items() if k not in item)
            out.append(item)
            parts.clear()

    for i, block in enumerate(content):
        btype = block["type"]
        if btype == "item":
            flush()
            out.append(block["item"])
        elif btype in ("text", "image"):
            parts.append(_input_part(block))
        else:
            raise refuse_block("responses", role, block, f"{where}.content[{i}]")
    if not out and not parts:  # an empty message is still a message
        parts.append({"type": "input_text", "text": ""})
    flush()
    return out


def _input_part(block: Mapping[str, Any]) -> dict[str, Any]:
    if block["type"] == "text":
        return {"type": "input_text", "text": block["text"]}
    url = block.get("url")
    if url is None:
        url = f"data:{block['media_type']};base64,{block['data']}"
    part: dict[str, Any] = {"type": "input_image", "image_url": url}
    if "detail" in block:
        part["detail"] = block["detail"]
    return part


def _tool_output(block: Mapping[str, Any], where: str) -> dict[str, Any]:
    if block["type"] != "tool_result":
        raise refuse_block("responses", "tool", block, where)
    content = block["content"]
    output: Any
    if isinstance(content, str):
        output = content
    else:
        output = []
        for k, part in enumerate(content):
            if part.get("type") not in ("text", "image"):
                raise refuse_block("responses", "tool", part, f"{where}.content[{k}]")
            output.append(_input_part(part))
    return {"type": "function_call_output", "call_id": block["tool_call_id"], "output": output}


def _assistant(content: Sequence[Mapping[str, Any]], where: str) -> list[Any]:
    out: list[Any] = []
    for i, block in enumerate(content):
        btype = block["type"]
        if btype == "text":
            # One message item per text block: the output had one per message item.
            part = {"type": "output_text", "text": block["text"]}
            out.append({"type": "message", "role": "assistant", "content": [part]})
        elif btype == "reasoning":
            if isinstance(block.get("summary"), list):
                item = {"type": "reasoning"}
                item.update((k, v) for k, v in block.items() if k not in ("type", "text"))
                out.append(item)
        elif btype == "tool_call":
            out.append(
                {
                    "type": "function_call",
                    "call_id": block["id"],
                    "name": block["name"],
                    # verbatim: the log's string is what the model wrote.
                    "arguments": block["arguments"],
                }
            )
        elif btype == "item":
            out.append(block["item"])
        else:
            raise refuse_block("responses", "assistant", block, f"{where}.content[{i}]")
    return out
