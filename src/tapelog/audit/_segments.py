"""Loop requests -> cache segments, as the emulator renders their bodies, incrementally.

The emulator renders a request *body* into segments (``tapelog.emulator``'s
``openai_sources`` / ``anthropic_sources``) and chains them into prefix keys.
Re-encoding and re-rendering the whole history for every request would make an
audit quadratic in the log, so :class:`SegmentRenderer` renders what the body is
made of instead, with the live serializers' own per-node functions
(``OpenAIWire.message``, ``ResponsesWire.items``, the Anthropic message
grouping and breakpoint rule):
each surface node is rendered once per wire configuration, and each request
extends the previous request's chain by what it appended. A header change, a
replace or another model re-renders the request from the cached pieces.
Tests check that the result equals rendering the full encoded body.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import accumulate
from typing import Any

from tapelog.cache._api import (
    Prompt,
    Rule,
    Segment,
    SegmentSource,
    anthropic_block_source,
    anthropic_sources,
    chain_segments,
    openai_message_source,
    openai_sources,
    prefix_root,
    provider_cache,
    responses_item_source,
    responses_sources,
)
from tapelog.llm import LlmRequest
from tapelog.llm._api import AnthropicWire, BodyCache, OpenAIWire, ResponsesWire, merges, wire_for
from tapelog.log._api import EpochHeader, FrozenDict, History, concat_frozen, encode_trusted

__all__ = ["SegmentRenderer", "rule_for"]


def rule_for(provider: str) -> Rule:
    """The cache rule the audit expects of ``provider`` (docs/providers.md)."""
    return provider_cache(provider).rule


class _KeepCache(BodyCache):
    """A per-node piece cache that keeps every piece: the audit renders only the
    tail of each request, which must not evict the pieces of the rest."""

    def prune(self, live: Any) -> None:
        return None


Group = tuple[str, list[tuple[FrozenDict, bytes]]]


class SegmentRenderer:
    """Renders successive loop requests of one log into :class:`Prompt` views.

    Call :meth:`render` in send order; ``appended_only`` says the history only
    grew by appends since the previous call (the walker knows).
    """

    def __init__(self) -> None:
        # Per chain key (``_identity``), per node seq: each node rendered once.
        self._openai_pieces: dict[object, dict[int, SegmentSource]] = {}
        self._openai_bytes: dict[object, dict[int, bytes]] = {}
        """Each node's wire bytes (the body's piece), per chain key: what
        :meth:`wire_pieces` gives the body digests, so they encode no node again."""
        self._responses_pieces: dict[object, dict[int, list[SegmentSource]]] = {}
        self._anthropic_cache = _KeepCache()
        self._key: object = None
        self._header: EpochHeader | None = None
        self._identity: tuple[Rule, Any, object] = ("deepseek", None, None)
        """``_identity(self._header)``: a header held on costs nothing to look up."""
        self._count = 0  # history nodes rendered so far
        self._segments: list[Segment] = []
        self._ends: list[int] = []
        self._head_points: list[int] = []
        self._head_len = 0
        # Anthropic: the grouped messages, where each starts (segment / node index).
        self._groups: list[Group] = []
        self._group_start: list[int] = []
        self._group_node: list[int] = []
        self._last_assistant = -1

    def render(
        self,
        header: EpochHeader,
        nodes: Sequence[tuple[int, FrozenDict]],
        *,
        appended_only: bool,
    ) -> tuple[Rule, Prompt]:
        if header is self._header:  # the walk hands the same header object on
            rule, wire, key = self._identity
        else:
            rule, wire, key = self._identity = _identity(header)
        same = (
            appended_only
            and key == self._key
            and (header is self._header or header == self._header)
            and len(nodes) >= self._count
        )
        if not same:
            self._start(rule, header, wire, key)
        self._header = header  # equal if kept: the next request's is likely this object
        if isinstance(wire, OpenAIWire):
            self._extend_openai(wire, header, nodes)
        elif isinstance(wire, ResponsesWire):
            self._extend_responses(wire, nodes)
        else:
            assert isinstance(wire, AnthropicWire)
            self._extend_anthropic(wire, header, nodes)
        self._count = len(nodes)
        return rule, Prompt(self._segments, self._ends, self._points())

    def chain(self) -> dict[str, Any] | None:
        """The chain the last :meth:`render` left, as JSON for a checkpoint
        (``None`` before the first, and for Anthropic, whose groups hold
        rendered blocks: a resumed audit renders that request again)."""
        header = self._header
        if header is None or isinstance(_identity(header)[1], AnthropicWire):
            return None
        segments = self._segments
        return {
            "count": self._count,
            "head_len": self._head_len,
            "head_points": list(self._head_points),
            "keys": [s.key for s in segments],
            "tokens": [s.tokens for s in segments],
            "breakpoints": [i for i, s in enumerate(segments) if s.breakpoint],
        }

    def resume(
        self, header: EpochHeader, nodes: Sequence[tuple[int, FrozenDict]], chain: Any
    ) -> tuple[Rule, Prompt] | None:
        """What :meth:`render` of ``header`` and ``nodes`` gives, from the
        :meth:`chain` it left then (kept by a checkpoint) instead of rendering
        every node again; ``None`` when ``chain`` cannot be that (the caller
        renders). The per-node pieces are not kept: a later re-render makes them."""
        rule, wire, key = self._identity = _identity(header)
        keys, tokens, points = chain["keys"], chain["tokens"], set(chain["breakpoints"])
        if (
            isinstance(wire, AnthropicWire)
            or chain["count"] != len(nodes)
            or len(keys) != len(tokens)
            or not all(isinstance(k, str) for k in keys)
            or not all(type(t) is int for t in tokens)
        ):
            return None
        self._key, self._header, self._count = key, header, len(nodes)
        pairs = enumerate(zip(keys, tokens, strict=True))
        self._segments = [Segment(k, t, i in points) for i, (k, t) in pairs]
        self._ends = list(accumulate(tokens))
        self._groups, self._group_start, self._group_node = [], [], []
        self._last_assistant = -1
        self._head_points = [int(i) for i in chain["head_points"]]
        self._head_len = int(chain["head_len"])
        config = header.config
        self._root = prefix_root(rule, config.model, config.extras.get("prompt_cache_key"))
        return rule, Prompt(self._segments, self._ends, self._points())

    # --- shared ---------------------------------------------------------------

    def _start(self, rule: Rule, header: EpochHeader, wire: Any, key: object) -> None:
        """A fresh chain: the header's own segments (tools, system; prefix for OpenAI)."""
        self._key, self._header, self._count = key, header, 0
        # New lists: the Prompt views already handed out must keep their contents.
        self._segments, self._ends = [], []
        self._groups, self._group_start, self._group_node = [], [], []
        self._last_assistant = -1
        anthropic = isinstance(wire, AnthropicWire)
        prefix = [] if anthropic else list(header.prefix)
        body = wire.build_body(LlmRequest(header=header, messages=concat_frozen(prefix)))
        if isinstance(wire, OpenAIWire):
            sources = openai_sources(body)
        elif isinstance(wire, ResponsesWire):
            sources = responses_sources(body)
        else:
            sources = anthropic_sources({k: v for k, v in body.items() if k != "messages"})
        config = header.config
        self._root = prefix_root(rule, config.model, config.extras.get("prompt_cache_key"))
        self._chain(sources)
        self._head_points = [i for i, s in enumerate(self._segments) if s.breakpoint]
        self._head_len = len(self._segments)

    def _chain(self, sources: Sequence[SegmentSource]) -> None:
        segments = chain_segments(self._root, sources, after=self._segments)
        total = self._ends[-1] if self._ends else 0
        for segment in segments:
            total += segment.tokens
            self._ends.append(total)
        self._segments.extend(segments)

    def _points(self) -> list[int]:
        if not self._groups:
            return list(self._head_points)
        lo = max(self._last_assistant - 1, 0)
        marks = AnthropicWire.breakpoints(self._groups[lo:])
        body = sorted(self._group_start[lo + g] + j for g, j in marks)
        return [*self._head_points, *body]

    # --- OpenAI-compatible ----------------------------------------------------

    def _extend_openai(
        self, wire: OpenAIWire, header: EpochHeader, nodes: Sequence[tuple[int, FrozenDict]]
    ) -> None:
        model = header.config.model
        pieces = self._openai_pieces.setdefault(self._key, {})
        wire_bytes = self._openai_bytes.setdefault(self._key, {})
        sources: list[SegmentSource] = []
        for i, (seq, message) in _new_nodes(nodes, self._count):
            source = pieces.get(seq)
            if source is None:
                piece = wire.message(message, model=model, where=f"messages[{i}]")
                plain = wire_bytes[seq] = memoryview(encode_trusted(piece)).tobytes()
                source = pieces[seq] = openai_message_source(piece, plain)
            sources.append(source)
        self._chain(sources)

    def wire_pieces(self, header: EpochHeader) -> Mapping[int, bytes]:
        """The wire bytes of the history nodes rendered for requests with
        ``header``'s wire (by node seq): the pieces its body is made of (the
        OpenAI-compatible wire's; none for the others)."""
        return self._openai_bytes.get(_identity(header)[2], {})

    # --- OpenAI Responses --------------------------------------------------------

    def _extend_responses(
        self, wire: ResponsesWire, nodes: Sequence[tuple[int, FrozenDict]]
    ) -> None:
        """Each new node's input items (none, one or several), rendered once per node."""
        pieces = self._responses_pieces.setdefault(self._key, {})
        sources: list[SegmentSource] = []
        for i, (seq, message) in _new_nodes(nodes, self._count):
            found = pieces.get(seq)
            if found is None:
                items = wire.items(message, where=f"messages[{i}]")
                found = pieces[seq] = [responses_item_source(item) for item in items]
            sources.extend(found)
        self._chain(sources)

    # --- Anthropic --------------------------------------------------------------

    def _extend_anthropic(
        self, wire: AnthropicWire, header: EpochHeader, nodes: Sequence[tuple[int, FrozenDict]]
    ) -> None:
        """Re-render from the last group on: new nodes may merge into it."""
        prefix = list(header.prefix)
        if self._groups:
            g = len(self._groups) - 1
            first, start = self._group_node[g], self._group_start[g]
        else:
            g, first, start = 0, 0, self._head_len
        # Message i of the request: prefix messages first (no seq), then history.
        # Only the tail from ``first`` on is built: the rest is already rendered.
        skip = len(prefix)
        messages: list[Any] = [*prefix[first:], *(m for _, m in nodes[max(first - skip, 0) :])]
        seqs: list[int | None] = [
            *(None for _ in prefix[first:]),
            *(s for s, _ in nodes[max(first - skip, 0) :]),
        ]
        tail = LlmRequest(header=header, messages=concat_frozen(messages), node_seqs=tuple(seqs))
        groups = wire.groups(tail, self._anthropic_cache)
        firsts = [first + i for i in self._group_firsts(wire, messages, seqs)]
        assert len(firsts) == len(groups)
        sources: list[SegmentSource] = []
        starts: list[int] = []
        for role, blocks in groups:
            starts.append(start + len(sources))
            sources.extend(
                anthropic_block_source(block, role=role, opens=j == 0)
                for j, (block, _) in enumerate(blocks)
            )
        old = self._segments[start:]
        after = self._segments[start - 1 : start] if start else []
        fresh = chain_segments(self._root, sources[: len(old)], after=after)
        if [s.key for s in fresh] == [s.key for s in old]:
            self._chain(sources[len(old) :])
        else:
            # The last group changed inside (a block sorted before an old one).
            self._segments, self._ends = self._segments[:start], self._ends[:start]
            self._chain(sources)
        self._groups[g:] = groups
        self._group_start[g:] = starts
        self._group_node[g:] = firsts
        for k in range(len(self._groups) - 1, -1, -1):
            if self._groups[k][0] == "assistant":
                self._last_assistant = k
                break

    def _group_firsts(
        self, wire: AnthropicWire, messages: Sequence[Any], seqs: Sequence[int | None]
    ) -> list[int]:
        """The index of the message each wire group starts at (consecutive roles merge)."""
        firsts: list[int] = []
        role: str | None = None
        for i in range(len(messages)):

            def make(message: Any = messages[i], i: int = i) -> Any:
                return wire.message_blocks(message, where=f"messages[{i}]")

            wire_role, mapped = self._anthropic_cache.piece(seqs[i], messages[i], make)
            if not mapped:
                continue
            if role is None or not merges(role, wire_role):
                firsts.append(i)
                role = wire_role
        return firsts


def _new_nodes(
    nodes: Sequence[tuple[int, FrozenDict]], start: int
) -> Iterable[tuple[int, tuple[int, FrozenDict]]]:
    """``(i, nodes[i])`` from ``start`` on (a :class:`History` is read from its
    lists: a request's new nodes are a few of many)."""
    if isinstance(nodes, History):
        end = len(nodes)
        pairs = zip(nodes.seqs[start:end], nodes.messages[start:end], strict=True)
        return enumerate(pairs, start)
    return ((i, nodes[i]) for i in range(start, len(nodes)))


def _identity(header: EpochHeader) -> tuple[Rule, Any, object]:
    """The cache rule, the wire, and what a chain is rendered for (same key:
    same pieces, so a request may extend the previous one's chain)."""
    config = header.config
    rule = rule_for(config.provider)
    wire = wire_for(config)
    if isinstance(wire, OpenAIWire):
        key: object = ("openai", wire.dialect, wire.send_back_for(config.model), rule)
    elif isinstance(wire, ResponsesWire):
        key = ("responses", wire.dialect, rule)
    else:
        key = ("anthropic", rule)
    return rule, wire, (key, config.model, config.extras.get("prompt_cache_key"))
