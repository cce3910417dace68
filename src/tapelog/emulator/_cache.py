"""The prompt-cache engine: each provider's documented rule as a pure function.

A request is rendered (see ``_render``) into a list of :class:`Segment` — one
per tool, system block, message or content block, depending on the provider.
Each segment carries the hash-chain key of the prefix that ends with it, so two
requests share a prefix exactly as far as their segments are identical, and a
prefix is only ever matched whole-segment (no partial match inside one).

The rules take the segments and a read-only view of what is stored and return a
:class:`CacheOutcome`: the token counts to report plus the keys to store and the
keys that were hit. They never mutate anything, which is what makes them easy to
test by property; :class:`PrefixStore` is the one stateful piece (optional TTL).

Sources (PROVIDERS.md, "Emulator rules" and the per-provider sections):
DeepSeek caches the longest stored prefix in whole units (64 tokens in its 2024
docs) and stores units at the end of the input and of the output; OpenAI caches
nothing below 1024 shared tokens and then 128-token steps; Anthropic reads only
at ``cache_control`` breakpoints, looking back at most 20 blocks for an earlier
write, and writes nothing below the model's minimum prefix.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Container, Iterable, Sequence
from dataclasses import dataclass, field

__all__ = [
    "CacheOutcome",
    "PrefixStore",
    "Segment",
    "SegmentSource",
    "anthropic_rule",
    "chain_segments",
    "deepseek_rule",
    "openai_rule",
]


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
    for source in sources:
        h = hashlib.sha256(previous.encode("ascii"))
        h.update(b"\x00")
        h.update(source.identity)
        previous = h.hexdigest()
        out.append(Segment(key=previous, tokens=source.tokens, breakpoint=source.breakpoint))
    return out


@dataclass(frozen=True, slots=True)
class CacheOutcome:
    """What one request reports and what it leaves behind.

    ``read + write + uncached == prompt`` always holds. ``write`` is non-zero only
    for rules that bill writes (Anthropic). ``writes`` are the prefix keys to
    store after the request; ``hits`` the stored keys it read (refreshed on TTL).
    """

    prompt: int
    read: int
    write: int
    uncached: int
    writes: tuple[str, ...] = ()
    hits: tuple[str, ...] = ()


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
    prompt: Sequence[Segment],
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
    ends = _ends(prompt)
    total = ends[-1] if ends else 0
    hit = _longest_stored(prompt, stored)
    shared = ends[hit] if hit >= 0 else 0
    read = unit * (shared // unit)
    writes = [s.key for s in prompt]
    for reply in replies:
        writes.extend(s.key for s in reply)
    hits = (prompt[hit].key,) if hit >= 0 else ()
    return CacheOutcome(total, read, 0, total - read, tuple(writes), hits)


def openai_rule(
    prompt: Sequence[Segment],
    stored: Container[str],
    *,
    minimum: int = 1024,
    step: int = 128,
) -> CacheOutcome:
    """OpenAI (before GPT-5.6): nothing below ``minimum`` shared tokens, then ``step``s."""
    ends = _ends(prompt)
    total = ends[-1] if ends else 0
    hit = _longest_stored(prompt, stored)
    shared = ends[hit] if hit >= 0 else 0
    read = 0 if shared < minimum else step * (shared // step)
    hits = (prompt[hit].key,) if hit >= 0 and read else ()
    return CacheOutcome(total, read, 0, total - read, tuple(s.key for s in prompt), hits)


def anthropic_rule(
    prompt: Sequence[Segment],
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
    ends = _ends(prompt)
    total = ends[-1] if ends else 0
    points = [i for i, s in enumerate(prompt) if s.breakpoint]
    deepest = -1
    for point in points:
        for i in range(point, max(point - lookback, 0) - 1, -1):
            if prompt[i].key in stored:
                deepest = max(deepest, i)
                break
    read = ends[deepest] if deepest >= 0 else 0
    write = 0
    if points and points[-1] > deepest and ends[points[-1]] >= minimum:
        write = ends[points[-1]] - read
    writes = tuple(prompt[p].key for p in points if ends[p] >= minimum)
    hits = (prompt[deepest].key,) if deepest >= 0 else ()
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
        """Record a request's writes and refresh its hits."""
        now = self.clock()
        for key in (*outcome.hits, *outcome.writes):
            self._touched[key] = now

    def clear(self) -> None:
        self._touched.clear()
