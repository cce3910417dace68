"""Prompt-cache rules: each provider's documented rule as a pure function.

A request is rendered (see ``_render``) into a list of :class:`Segment` — one
per tool, system block, message or content block, depending on the provider.
Each segment carries the hash-chain key of the prefix that ends with it, so two
requests share a prefix exactly as far as their segments are identical, and a
prefix is only ever matched whole-segment (no partial match inside one).

The rules take the segments and a read-only view of what is stored and return a
:class:`CacheOutcome`: the token counts to report plus the keys to store and the
keys that were hit. They never mutate anything, which is what makes them easy to
test by property; :class:`PrefixStore` is the one stateful piece (optional TTL).
:func:`account` applies a rule and updates a store: the emulator and the cache
audit (``tapelog.audit.cache_report``) both call it, so they cannot disagree.
A rule takes a plain segment list or a :class:`Prompt` whose prefix lengths and
breakpoints were computed once (the audit extends one per request), and reads
only the positions it needs, so a request costs what it inspects.

Sources (docs/providers.md, "Prompt caches", which names each provider's page):
DeepSeek caches the longest stored prefix in whole units (64 tokens in its 2024
docs) and stores units at the end of the input and of the output; OpenAI caches
nothing below 1024 shared tokens and then 128-token steps; Anthropic reads only
at ``cache_control`` breakpoints, looking back at most 20 blocks for an earlier
write, and writes nothing below the model's minimum prefix.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Container, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal, overload

__all__ = [
    "CacheOutcome",
    "PrefixStore",
    "Prompt",
    "Rule",
    "Segment",
    "SegmentSource",
    "account",
    "anthropic_rule",
    "chain_segments",
    "deepseek_rule",
    "openai_rule",
]

Rule = Literal["deepseek", "openai", "anthropic"]


@dataclass(frozen=True, slots=True)
class SegmentSource:
    """What a segment is before chaining: its identity bytes and its token estimate."""

    identity: bytes
    tokens: int
    breakpoint: bool = False


@dataclass(frozen=True, slots=True)
class Segment:
    """One rendered piece of a prompt.

    ``key`` names the whole prefix that ends with this segment (a hash chain), so
    equal keys mean equal prefixes. ``breakpoint`` marks an Anthropic
    ``cache_control`` position; the other rules ignore it.
    """

    key: str
    tokens: int
    breakpoint: bool = False


def chain_segments(
    root: str, sources: Iterable[SegmentSource], *, after: Sequence[Segment] = ()
) -> list[Segment]:
    """Chain ``sources`` into segments, continuing ``after`` if given (else ``root``).

    ``root`` scopes the cache (rule and model): the same messages sent to another
    model share nothing, as with a real provider.
    """
    previous = after[-1].key if after else hashlib.sha256(root.encode("utf-8")).hexdigest()
    out: list[Segment] = []
    sha256, append = hashlib.sha256, out.append
    for source in sources:
        # sha256(previous key, NUL, identity): one call per segment of every audited request.
        previous = sha256(b"%s\x00%s" % (previous.encode("ascii"), source.identity)).hexdigest()
        append(_segment(previous, source.tokens, source.breakpoint))
    return out


def _segment(key: str, tokens: int, breakpoint: bool) -> Segment:
    """``Segment(key, tokens, breakpoint)`` without the frozen dataclass's
    ``__init__`` (three ``object.__setattr__`` calls): the slots set directly."""
    segment = _new(Segment)
    _set_key(segment, key)
    _set_tokens(segment, tokens)
    _set_breakpoint(segment, breakpoint)
    return segment


_new = object.__new__
_set_key = Segment.__dict__["key"].__set__
_set_tokens = Segment.__dict__["tokens"].__set__
_set_breakpoint = Segment.__dict__["breakpoint"].__set__


@dataclass(frozen=True, slots=True)
class CacheOutcome:
    """What one request reports and what it leaves behind.

    ``read + write + uncached == prompt`` always holds. ``write`` is non-zero only
    for rules that bill writes (Anthropic). ``writes`` are the prefix keys to
    store after the request; ``hits`` the stored keys it read (refreshed on TTL).
    ``known`` counts the leading ``writes`` the store already held: the prefixes
    of the deepest hit of a rule whose stored keys are prefix-closed (DeepSeek,
    OpenAI), which a store without TTL need not touch again.
    """

    prompt: int
    read: int
    write: int
    uncached: int
    writes: Sequence[str] = ()
    hits: tuple[str, ...] = ()
    known: int = 0


class _Keys(Sequence[str]):
    """The keys of runs of segments, read lazily (a long prompt's writes cost
    nothing until a store reads the ones it needs). The lengths are fixed when
    made, so runs that are lists extended later still read the same keys."""

    __slots__ = ("_runs",)

    def __init__(self, runs: Iterable[Sequence[Segment]]) -> None:
        self._runs = [(run, len(run)) for run in runs]

    def __len__(self) -> int:
        return sum(n for _, n in self._runs)

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> list[str]: ...
    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        for run, n in self._runs:
            if 0 <= index < n:
                return run[index].key
            index -= n
        raise IndexError(index)

    def __iter__(self) -> Iterator[str]:
        return self.from_index(0)

    def from_index(self, start: int) -> Iterator[str]:
        """The keys from position ``start`` on (a store adds only the new ones)."""
        for run, n in self._runs:
            if start < n:
                for i in range(max(start, 0), n):
                    yield run[i].key
            start -= n

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


@dataclass(frozen=True, slots=True)
class Prompt:
    """Chained segments with their prefix lengths and breakpoint positions.

    ``ends[i]`` is the token count through segment ``i``; ``points`` are the
    indexes of Anthropic breakpoints. :meth:`of` computes both from a segment
    list; a caller that grows a prompt request by request can keep them as it
    goes (the lists must then only ever be extended, never rewritten).
    """

    segments: Sequence[Segment]
    ends: Sequence[int]
    points: Sequence[int] = ()

    @classmethod
    def of(cls, segments: Sequence[Segment]) -> Prompt:
        return cls(segments, _ends(segments), [i for i, s in enumerate(segments) if s.breakpoint])

    @property
    def total(self) -> int:
        return self.ends[-1] if self.ends else 0


def _view(prompt: Sequence[Segment] | Prompt) -> Prompt:
    return prompt if isinstance(prompt, Prompt) else Prompt.of(prompt)


def _ends(segments: Sequence[Segment]) -> list[int]:
    """Cumulative token counts: ``ends[i]`` is the prefix length through segment i."""
    total = 0
    out: list[int] = []
    for segment in segments:
        total += segment.tokens
        out.append(total)
    return out


def _longest_stored(segments: Sequence[Segment], stored: Container[str]) -> int:
    """Index of the last segment whose prefix is stored, or -1."""
    for i in range(len(segments) - 1, -1, -1):
        if segments[i].key in stored:
            return i
    return -1


def deepseek_rule(
    prompt: Sequence[Segment] | Prompt,
    stored: Container[str],
    *,
    replies: Sequence[Sequence[Segment]] = (),
    unit: int = 64,
) -> CacheOutcome:
    """DeepSeek: the longest stored prefix, rounded down to whole ``unit`` tokens.

    Stores every prefix of the prompt and of each rendering in ``replies`` (the
    reply as the client would send it back, chained after the prompt), so the
    next turn reads through the previous reply only if it comes back exactly.
    """
    view = _view(prompt)
    segments = view.segments
    hit = _longest_stored(segments, stored)
    shared = view.ends[hit] if hit >= 0 else 0
    read = unit * (shared // unit)
    hits = (segments[hit].key,) if hit >= 0 else ()
    total = view.total
    writes = _Keys([segments, *replies])
    return CacheOutcome(total, read, 0, total - read, writes, hits, hit + 1)


def openai_rule(
    prompt: Sequence[Segment] | Prompt,
    stored: Container[str],
    *,
    minimum: int = 1024,
    step: int = 128,
) -> CacheOutcome:
    """OpenAI (before GPT-5.6): nothing below ``minimum`` shared tokens, then ``step``s."""
    view = _view(prompt)
    segments = view.segments
    hit = _longest_stored(segments, stored)
    shared = view.ends[hit] if hit >= 0 else 0
    read = 0 if shared < minimum else step * (shared // step)
    hits = (segments[hit].key,) if hit >= 0 and read else ()
    total = view.total
    return CacheOutcome(total, read, 0, total - read, _Keys([segments]), hits, hit + 1)


def anthropic_rule(
    prompt: Sequence[Segment] | Prompt,
    stored: Container[str],
    *,
    minimum: int = 1024,
    lookback: int = 20,
) -> CacheOutcome:
    """Anthropic: reads and writes only at ``cache_control`` breakpoints.

    For each breakpoint, the first stored write found at its position or walking
    back at most ``lookback`` blocks; read = tokens through the deepest such hit;
    creation = tokens from there through the last breakpoint when that prefix
    reaches ``minimum`` (else nothing is cached and no error is raised); the rest
    is uncached input. Writes are stored at every breakpoint that reaches
    ``minimum``.
    """
    view = _view(prompt)
    segments, ends, points = view.segments, view.ends, view.points
    total = view.total
    deepest = -1
    for point in points:
        for i in range(point, max(point - lookback, 0) - 1, -1):
            if segments[i].key in stored:
                deepest = max(deepest, i)
                break
    read = ends[deepest] if deepest >= 0 else 0
    write = 0
    if points and points[-1] > deepest and ends[points[-1]] >= minimum:
        write = ends[points[-1]] - read
    writes = tuple(segments[p].key for p in points if ends[p] >= minimum)
    hits = (segments[deepest].key,) if deepest >= 0 else ()
    return CacheOutcome(total, read, write, total - read - write, writes, hits)


@dataclass
class PrefixStore:
    """The stored prefix keys of one emulated provider, with an optional TTL.

    Deterministic by default: nothing is ever evicted. With ``ttl_seconds`` an
    entry expires that long after it was last written or hit (a hit refreshes
    it, as Anthropic documents for its 5-minute cache).
    """

    ttl_seconds: float | None = None
    clock: Callable[[], float] = field(default=lambda: 0.0)
    _touched: dict[str, float] = field(default_factory=dict, init=False)

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str) or key not in self._touched:
            return False
        if self.ttl_seconds is not None and self.clock() - self._touched[key] > self.ttl_seconds:
            del self._touched[key]
            return False
        return True

    def __len__(self) -> int:
        return len(self._touched)

    def apply(self, outcome: CacheOutcome) -> None:
        """Record a request's writes and refresh its hits.

        Without a TTL, touching a key again changes nothing, so the writes the
        store already held (``outcome.known``) are skipped: a request then costs
        what it added, not the length of its prompt.
        """
        now = self.clock()
        writes = outcome.writes
        start = outcome.known if self.ttl_seconds is None else 0
        touched = self._touched
        for key in outcome.hits:
            touched[key] = now
        if isinstance(writes, _Keys):
            for key in writes.from_index(start):
                touched[key] = now
        else:
            for i in range(start, len(writes)):
                touched[writes[i]] = now

    def clear(self) -> None:
        self._touched.clear()

    def keys(self) -> list[str]:
        """The keys held, in the order they were first written (what a
        checkpoint of the cache audit keeps of this store)."""
        return list(self._touched)

    def hold(self, keys: Iterable[str]) -> None:
        """Hold ``keys`` as written now (a checkpointed store, restored)."""
        now = self.clock()
        for key in keys:
            self._touched[key] = now


def peek(
    rule: Rule,
    prompt: Sequence[Segment] | Prompt,
    store: Container[str],
    *,
    reply: Sequence[SegmentSource] = (),
    deepseek_unit: int = 64,
    anthropic_minimum: int = 1024,
) -> CacheOutcome:
    """What ``rule`` reads and writes for one request, leaving ``store`` as it is.

    The cache audit asks it what a prompt sent again would have read (the
    tokens a break cost); :func:`account` applies its outcome.
    """
    view = _view(prompt)
    if rule == "deepseek":
        replies = [chain_segments("", [source], after=view.segments) for source in reply]
        return deepseek_rule(view, store, replies=replies, unit=deepseek_unit)
    if rule == "openai":
        return openai_rule(view, store)
    if rule == "anthropic":
        return anthropic_rule(view, store, minimum=anthropic_minimum)
    raise ValueError(f"unknown cache rule {rule!r}")


def account(
    rule: Rule,
    prompt: Sequence[Segment] | Prompt,
    store: PrefixStore,
    *,
    reply: Sequence[SegmentSource] = (),
    deepseek_unit: int = 64,
    anthropic_minimum: int = 1024,
) -> CacheOutcome:
    """Apply ``rule`` to one request and record what it leaves in ``store``.

    ``reply`` holds the renderings of the answer as a client would send it back
    (see ``reply_sources``); only DeepSeek stores them, each chained after the
    prompt. The emulator and the cache audit both go through here.
    """
    outcome = peek(
        rule,
        prompt,
        store,
        reply=reply,
        deepseek_unit=deepseek_unit,
        anthropic_minimum=anthropic_minimum,
    )
    store.apply(outcome)
    return outcome
