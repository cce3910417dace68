"""Neutral request -> Anthropic Messages body (pure), with cache breakpoints.

Anthropic caches only at ``cache_control`` breakpoints (at most 4), so the
serializer places them by a fixed rule that needs nothing but the request:

1. the last tool, 2. the system prompt, 3. the last cacheable block of the
last message (written by this request), 4. the last cacheable block of the
message before the last assistant turn -- the block that was breakpoint 3 of
the previous loop request, so this request reads exactly where that one wrote,
however many blocks the new step added (no reliance on the 20-block lookback).

Thinking blocks cannot carry ``cache_control``, so "cacheable" skips them;
blank text blocks are not sent at all (the API rejects them).
docs/providers.md documents the policy.

With the wire option ``config.wire.cache_markers: "client"`` (what
``tapelog proxy`` logs) the wire places no breakpoint of its own: the markers
are where the client put them, in the logged blocks (``extra``), system blocks
and tools, and a string system prompt is sent as a string. A block's
``extra`` (the client's fields the neutral block does not model, such as
``cache_control`` or ``citations``) is sent after the wire's own fields, and a
``wire`` block (a block type the log does not model: ``server_tool_use``,
``document``, ``search_result``...) is sent as it was given.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from tapelog._errors import HeaderError
from tapelog.llm._anthropic_blocks import (
    Block,
    WireRole,
    map_message,
    merges,
    tool_body,
)
from tapelog.llm._pieces import (
    BodyCache,
    ByteRun,
    Parts,
    json_array,
    node_seq_list,
    object_parts,
)
from tapelog.llm._types import LlmRequest
from tapelog.llm._wire_common import check_extras
from tapelog.log import encode
from tapelog.log._api import FrozenDict, encode_trusted, freeze, freeze_faithful

__all__ = ["ANTHROPIC_DEFAULT_MAX_TOKENS", "AnthropicWire"]

ANTHROPIC_DEFAULT_MAX_TOKENS: Final = 4096
"""Sent when the config has no ``max_tokens`` (the Messages API requires one)."""

_EPHEMERAL: Final = freeze({"type": "ephemeral"})

_RESERVED: Final = (
    "model",
    "max_tokens",
    "system",
    "tools",
    "messages",
    "temperature",
    "top_p",
    "stop_sequences",
    "stream",
    # A top-level cache_control adds an automatic breakpoint: with ours that
    # could exceed the limit of 4, and it would move every request.
    "cache_control",
)

_MESSAGES = object()


Group = tuple[str, list[Block]]
"""A wire message: consecutive neutral messages of one wire role, merged."""

_CACHE_KEY: Final = ("anthropic",)


@dataclass(frozen=True, slots=True, kw_only=True)
class AnthropicWire:
    """The Anthropic Messages body (``POST /v1/messages``)."""

    name: str = field(default="anthropic", init=False)

    def _fields(self, request: LlmRequest) -> list[tuple[str, Any]]:
        header = request.header
        config = header.config
        own = _own_markers(config)
        # With the client's markers, a top-level cache_control is the client's too.
        check_extras(config.extras, _RESERVED if own else _RESERVED[:-1], self.name)
        for key, extra in (("seed", None), ("reasoning_effort", '{"output_config": {...}}')):
            if getattr(config, key) is not None:
                hint = f"; put {extra} in config.extras instead" if extra else ""
                raise HeaderError(
                    f"config.{key} has no Anthropic Messages field: leave it unset for the "
                    f"anthropic provider{hint}."
                )
        max_tokens = config.max_tokens
        fields: list[tuple[str, Any]] = [
            ("model", config.model),
            ("max_tokens", ANTHROPIC_DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens),
        ]
        system = header.system
        if isinstance(system, str) and own:
            fields.append(
                ("system", [{"type": "text", "text": system, "cache_control": _EPHEMERAL}])
            )
        elif system:
            fields.append(("system", system))
        if header.tools:
            tools = [tool_body(t) for t in header.tools]
            if own:
                tools[-1]["cache_control"] = _EPHEMERAL
            fields.append(("tools", tools))
        fields.append(("messages", _MESSAGES))
        for key in ("temperature", "top_p"):
            value = getattr(config, key)
            if value is not None:
                fields.append((key, value))
        if config.stop:
            fields.append(("stop_sequences", list(config.stop)))
        fields.append(("stream", True))
        fields.extend(config.extras.items())
        return fields

    def message_blocks(self, message: Mapping[str, Any], *, where: str = "message") -> Any:
        """One neutral message as ``(wire role, blocks)``; the per-node cache piece."""
        return map_message(message, where)

    def groups(self, request: LlmRequest, cache: BodyCache | None) -> list[Group]:
        """The wire messages of ``request``: consecutive neutral messages of one
        wire role merged, tool results first in a user message (what the cache
        audit renders, block by block)."""
        seqs = node_seq_list(request.messages, request.node_seqs)
        if cache is not None:
            cache.bind(_CACHE_KEY)
        groups, _ = _grouped(request.messages, seqs, 0, cache)
        if cache is not None:
            cache.prune(seqs)
        return groups

    @staticmethod
    def breakpoints(groups: Sequence[Group]) -> set[tuple[int, int]]:
        """``(group, block)`` positions that carry ``cache_control`` (rules 3 and 4)."""
        return _breakpoints(groups)

    def build_body(self, request: LlmRequest) -> FrozenDict:
        """The body object in one piece (``encode`` of it == :meth:`encode_body`)."""
        groups = self.groups(request, None)
        marks = _breakpoints(groups) if _own_markers(request.header.config) else set()
        messages = [
            {
                "role": str(role),
                "content": _as_string(role, blocks)
                or [
                    {**b[0], "cache_control": _EPHEMERAL} if (g, j) in marks else b[0]
                    for j, b in enumerate(blocks)
                ],
                **(role.extra if isinstance(role, WireRole) else {}),
            }
            for g, (role, blocks) in enumerate(groups)
        ]
        body = {k: (messages if v is _MESSAGES else v) for k, v in self._fields(request)}
        out: FrozenDict = freeze_faithful(body, path="body")
        return out

    def encode_body(self, request: LlmRequest, *, cache: BodyCache | None = None) -> bytes:
        """The exact HTTP body: same request, same bytes (with or without ``cache``)."""
        return b"".join(self.encode_parts(request, cache=cache))

    def _members(self, request: LlmRequest) -> list[tuple[str, bytes | None]]:
        """The encoded body members (``None``: the messages)."""
        return [
            (k, None if v is _MESSAGES else encode(v, path=f"body.{k}"))
            for k, v in self._fields(request)
        ]

    def encode_parts(self, request: LlmRequest, *, cache: BodyCache | None = None) -> Parts:
        """:meth:`encode_body` as the byte parts it joins."""
        own = _own_markers(request.header.config)
        if cache is None:
            # With the client's markers (not ``own``) they are in the blocks already.
            members = self._members(request)
            groups = self.groups(request, None)
            parts = _extend([], _group_pieces(groups, 0, _breakpoints(groups) if own else set()))
        else:
            parts = _cached_parts(request, cache, own)
            members = cache.head(request.header.canonical_bytes(), lambda: self._members(request))
        messages: Parts = [b"[", *parts, b"]"]
        return object_parts((k, messages if v is None else v) for k, v in members)


@dataclass(frozen=True, slots=True)
class _Stable:
    """The leading wire messages (groups) of a request that the next request of
    the session repeats byte for byte: groups before the last one (which may
    still grow by merging) and before the group breakpoint 4 marks (every
    other breakpoint is in a later group; after an append, so are the next
    request's, see :func:`_cached_parts`)."""

    groups: int  # how many
    start: int  # the message the first group after them starts at
    assistant: int  # the last assistant group among them (-1: none)
    role: str | None  # the role of the last of them
    blob: ByteRun  # their bytes, with b"," between them: only ever added to


def _own_markers(config: Any) -> bool:
    """Whether the wire places its own breakpoints (not ``cache_markers: client``)."""
    return bool(config.wire.get("cache_markers") != "client")


def _as_string(role: str, blocks: Sequence[Block]) -> str | None:
    """The content string of a wire message that is one block from a message
    logged with ``content_string`` (else ``None``: the content is a list)."""
    if isinstance(role, WireRole) and role.string and len(blocks) == 1:
        text: str = blocks[0][0]["text"]
        return text
    return None


def _nothing_stable() -> _Stable:
    return _Stable(groups=0, start=0, assistant=-1, role=None, blob=ByteRun())


def _cached_parts(request: LlmRequest, cache: BodyCache, own: bool) -> list[bytes]:
    """The inside of the messages array, with the groups the previous request
    of this session kept (:class:`_Stable`) reused as they are.

    Only the messages from the first unstable group on are grouped (each
    one's blocks come from the per-node cache) and encoded, so a step costs
    its new messages and the few before them, plus list copies. After an
    append the previous request's last group and breakpoint-4 group are the
    lower bound of this request's breakpoints (the last assistant group can
    only stay or move past the old last group), so no reused group gains or
    loses a ``cache_control``; that is checked, and the request is grouped
    from the start if it ever fails.
    """
    messages = request.messages
    seqs = node_seq_list(messages, request.node_seqs)
    cache.bind(_CACHE_KEY)
    keys = tuple(seqs)
    previous = cache.previous(keys, messages, scope=request.session_id, history=request.history)
    stable = _nothing_stable()
    if previous is not None and isinstance(previous[1], _Stable):
        stable = previous[1]
    groups, firsts = _grouped(messages, seqs, stable.start, cache)
    assistant = _last_assistant(groups, stable.groups, stable.assistant)
    if stable.groups and (
        not groups or groups[0][0] == stable.role or 1 <= assistant <= stable.groups
    ):
        stable = _nothing_stable()
        groups, firsts = _grouped(messages, seqs, 0, cache)
        assistant = _last_assistant(groups, 0, -1)
    base = stable.groups
    marks = _tail_breakpoints(groups, base, assistant) if own else set()
    pieces = _group_pieces(groups, base, marks)
    last = base + len(groups) - 1
    keep = max(base, min(last, assistant - 1) if assistant >= 1 else last) - base
    # The stable bytes only ever grow within a session: add to them (this
    # request extends the one they were made for); earlier parts stay as they are.
    blob = stable.blob
    for piece in pieces[:keep]:
        blob.add(piece)
    kept = _Stable(
        groups=base + keep,
        start=firsts[keep] if groups else stable.start,
        assistant=_last_assistant(groups[:keep], base, stable.assistant),
        role=groups[keep - 1][0] if keep else stable.role,
        blob=blob,
    )
    cache.remember(keys, messages, kept, scope=request.session_id, history=request.history)
    # Only the messages from the first unkept group on are grouped again next
    # time; the kept groups' bytes are in the run state.
    cache.prune(seqs if request.session_id is None else seqs[kept.start :])
    return _extend(blob.parts(), pieces[keep:])


def _grouped(
    messages: Sequence[Mapping[str, Any]],
    seqs: Sequence[int | None],
    start: int,
    cache: BodyCache | None,
) -> tuple[list[Group], list[int]]:
    """The wire messages of ``messages[start:]`` (consecutive roles merge), and
    the index of the message each one starts at."""
    groups: list[Group] = []
    firsts: list[int] = []
    for i in range(start, len(messages)):
        message = messages[i]

        def make(message: Any = message, i: int = i) -> tuple[str, tuple[Block, ...]]:
            return map_message(message, f"messages[{i}]")

        role, mapped = make() if cache is None else cache.piece(seqs[i], message, make)
        if not mapped:
            continue
        if groups and merges(groups[-1][0], role):
            groups[-1][1].extend(mapped)
        else:
            groups.append((role, list(mapped)))
            firsts.append(i)
    for role, blocks in groups:
        if role == "user":
            # Tool results must open the user message (stable: order kept).
            blocks.sort(key=lambda b: b[0]["type"] != "tool_result")
    return groups, firsts


def _group_pieces(groups: Sequence[Group], base: int, marks: set[tuple[int, int]]) -> list[bytes]:
    """The bytes of each wire message (``groups`` are groups ``base``, ``base + 1``...)."""
    pieces = []
    for g, (role, blocks) in enumerate(groups, start=base):
        string = _as_string(role, blocks)
        content = (
            encode_trusted(string)
            if string is not None
            else json_array(
                # The block is frozen log data already: only the marker is new.
                encode_trusted({**b[0], "cache_control": _EPHEMERAL}) if (g, j) in marks else b[1]
                for j, b in enumerate(blocks)
            )
        )
        extra = b""
        if isinstance(role, WireRole) and role.extra:
            extra = b"," + encode_trusted(role.extra)[1:-1]
        pieces.append(
            b'{"role":' + encode_trusted(str(role)) + b',"content":' + content + extra + b"}"
        )
    return pieces


def _extend(parts: list[Any], pieces: Iterable[bytes]) -> list[Any]:
    """``parts`` (a JSON array's inside) with ``pieces`` appended, ``b","`` between items."""
    for piece in pieces:
        if parts:
            parts.append(b",")
        parts.append(piece)
    return parts


def _cacheable(block: Mapping[str, Any]) -> bool:
    btype = block["type"]
    if btype in ("thinking", "redacted_thinking"):
        return False
    return not (btype == "text" and not block["text"])


def _last_cacheable(blocks: Sequence[Block]) -> int | None:
    for j in range(len(blocks) - 1, -1, -1):
        if _cacheable(blocks[j][0]):
            return j
    return None


def _last_assistant(groups: Sequence[Group], base: int, before: int) -> int:
    """The index of the last assistant group: in ``groups`` (groups ``base``,
    ``base + 1``...) if there is one, else ``before``."""
    for g in range(len(groups) - 1, -1, -1):
        if groups[g][0] == "assistant":
            return base + g
    return before


def _breakpoints(groups: Sequence[Group]) -> set[tuple[int, int]]:
    """Message-level breakpoints: the last message, and the previous request's last one."""
    return _tail_breakpoints(groups, 0, _last_assistant(groups, 0, -1))


def _tail_breakpoints(groups: Sequence[Group], base: int, assistant: int) -> set[tuple[int, int]]:
    """The breakpoints of a request whose groups from ``base`` on are ``groups``
    and whose last assistant group is ``assistant`` (the caller makes sure the
    group before it, if any, is among ``groups``)."""
    marks: set[tuple[int, int]] = set()
    if not groups:
        return marks
    last = _last_cacheable(groups[-1][1])
    if last is not None:
        marks.add((base + len(groups) - 1, last))
    if assistant >= 1:
        previous = _last_cacheable(groups[assistant - 1 - base][1])
        if previous is not None:
            marks.add((assistant - 1, previous))
    return marks
