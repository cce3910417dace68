"""The cache audit: what each request cached, what it should have, and why it did not.

``cache_report`` walks a log once. For every loop request it takes the usage
the provider reported (logged on the step's ``assistant/message``), simulates
the provider's cache rule over the rebuilt request with the emulator's own
accounting (``tapelog.cache.account``: same segments, same store, same
stored output prefixes) to get what a cache *should* have read, and, where the
request broke the prefix chain or got less than expected, names the logged
events that explain it. Pure and offline; the cost is proportional to the log
(see ``_segments`` and ``bench/bench_audit.py``). docs/cli.md documents the JSON.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Final, NamedTuple

from tapelog.audit._audit_state import AuditState, Seen
from tapelog.audit._bottom_line import BottomLine, bottom_line
from tapelog.audit._cache_cause import CacheCause
from tapelog.audit._log_causes import Previous, client_edit, log_causes
from tapelog.audit._provider_verdict import agrees, provider_verdict
from tapelog.audit._refs import RequestRef
from tapelog.audit._segments import SegmentRenderer
from tapelog.cache._api import (
    PrefixStore,
    Prompt,
    Rule,
    SegmentSource,
    account,
    openai_reply_sources,
    peek,
    provider_cache,
)
from tapelog.llm._api import usage_prompt_tokens
from tapelog.log._api import Event, Session, derive_event_message, paused_gc
from tapelog.request import walk_requests
from tapelog.request._api import WalkedRequest, reading_seq, request_fields

__all__ = [
    "CacheReport",
    "CacheTotals",
    "RequestCache",
    "audit_requests",
    "cache_report",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestCache(RequestRef):
    """One loop request's row (see docs/cli.md for each field)."""

    rule: str
    prompt_tokens: int
    cached_reported: int
    cached_expected: int
    shared_prefix_tokens: int
    drop: bool
    causes: tuple[CacheCause, ...]
    usage_logged: bool = True
    provider_verdict: str | None = None
    """The provider's own cache verdict (``_provider_verdict``), when it gave one."""
    provider_agrees: bool | None = None
    """Whether that verdict fits :attr:`causes` (``None``: inconclusive)."""
    lost_tokens: int = 0
    """Prompt tokens paid at full price that the cache could have served: what
    the previous prompt, sent again, would have read (or what this one was
    expected to read, when more), less what was read; 0 unless ``drop``."""

    @property
    def cross_session_tokens(self) -> int:
        """Cached tokens beyond what this session's own requests left in the cache:
        a prefix another session (another client, another run) had cached."""
        return max(0, self.cached_reported - self.cached_expected) if self.usage_logged else 0

    def to_json(self) -> dict[str, Any]:
        provider = {}
        if self.provider_verdict is not None:
            verdict = {"verdict": self.provider_verdict, "agrees": self.provider_agrees}
            provider = {"provider_verdict": verdict}  # beside "provider", the request's
        return {
            **self.ref_json(),
            "rule": self.rule,
            "prompt_tokens": self.prompt_tokens,
            "cached_reported": self.cached_reported,
            "cached_expected": self.cached_expected,
            "shared_prefix_tokens": self.shared_prefix_tokens,
            "drop": self.drop,
            "lost_tokens": self.lost_tokens,
            "cross_session_tokens": self.cross_session_tokens,
            "causes": [c.to_json() for c in self.causes],
            **provider,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheTotals:
    requests: int
    prompt_tokens: int
    cached_reported: int
    cached_expected: int
    hit_ratio: float
    """reported / prompt (0.0 without prompt tokens)."""
    efficiency: float
    """Expected tokens that were read / expected (1.0 when nothing was expected):
    never above 1, the reads beyond expected are ``cross_session_tokens``."""
    bottom_line: BottomLine

    def to_json(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "prompt_tokens": self.prompt_tokens,
            "cached_reported": self.cached_reported,
            "cached_expected": self.cached_expected,
            "hit_ratio": self.hit_ratio,
            "efficiency": self.efficiency,
            **self.bottom_line.to_json(),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheReport:
    session: str | None
    requests: tuple[RequestCache, ...]
    totals: CacheTotals

    def to_json(self) -> dict[str, Any]:
        """The stable JSON shape of ``tapelog cache --json`` (docs/cli.md)."""
        return {
            "session": self.session,
            "requests": [r.to_json() for r in self.requests],
            "totals": self.totals.to_json(),
        }


def _reply_sources(message: Event) -> list[SegmentSource]:
    """The logged answer as a DeepSeek cache stores it (the prompt's output prefixes)."""
    content = message.data["content"]
    return openai_reply_sources(
        "".join(b["text"] for b in content if b["type"] == "text"),
        "".join(b["text"] for b in content if b["type"] == "reasoning"),
        [(b["id"], b["name"], b["arguments"]) for b in content if b["type"] == "tool_call"],
    )


def cache_report(
    session_or_events: Session | Sequence[Event],
    *,
    session_id: str | None = None,
    walked: Sequence[WalkedRequest] | None = None,
) -> CacheReport:
    """The cache audit of a log: one row per loop request, with totals.

    A ``Session`` is trusted as loaded (stores and ``Session`` validate every
    event); a plain event list is validated first by replaying it. ``walked``
    is the session's :func:`walk_requests`, when the caller walked it already
    (a report page needs the walk too): one walk of the log serves both.
    """
    if isinstance(session_or_events, Session):
        session = session_or_events
    else:
        session = Session.from_events(session_or_events, id=session_id)
    requests = walk_requests(session) if walked is None else walked
    rows, _ = audit_requests(requests, keep=False)
    return report_of_rows(session_id or session.id, rows)


def audit_requests(
    requests: Iterable[WalkedRequest],
    *,
    resume: tuple[AuditState, Sequence[RequestCache]] | None = None,
    keep_before: int | None = None,
    keep: bool = True,
    renderer: SegmentRenderer | None = None,
) -> tuple[list[RequestCache], AuditState | None]:
    """The rows of ``requests`` (a whole walk, in send order), and (``keep``)
    the state after the last request anchored before seq ``keep_before`` (all
    of them when ``None``): what a checkpoint keeps to resume from.

    ``resume`` is such a state with the rows it covers: those requests are not
    audited again; the last of them is taken from the state's chain (or
    rendered again), for what the next one compares with (``_audit_state``).
    ``renderer``: a fresh one to render with, for a caller that then takes
    the nodes' wire pieces from it (:meth:`SegmentRenderer.wire_pieces`).
    """
    renderer = SegmentRenderer() if renderer is None else renderer
    stores: dict[Rule, PrefixStore] = {}
    seen: dict[Rule, Seen] = {}
    rows: list[RequestCache] = []
    done, chain = 0, None
    if resume is not None:
        state, kept = resume
        stores, seen = state.restore()
        rows, done, chain = list(kept[: state.requests]), state.requests, state.chain
    previous: Previous | None = None
    kept_state: AuditState | None = None
    keep_at = keep_before if keep and keep_before is not None else -1
    seq = -1
    with paused_gc(), _reading(lambda: seq):
        for request in requests:
            seq = request.boundary_seq
            if request.index <= done:
                if request.index == done:
                    previous = _resumed_previous(request, renderer, chain)
                continue
            if kept_state is None and 0 <= keep_at <= seq:
                kept_state = AuditState.of(len(rows), stores, seen, renderer)
            row, previous = _audit_one(request, renderer, stores, seen, previous)
            rows.append(row)
    if keep and kept_state is None:
        kept_state = AuditState.of(len(rows), stores, seen, renderer)
    return rows, kept_state


@contextlib.contextmanager
def _reading(seq: Callable[[], int]) -> Iterator[None]:
    """:func:`reading_seq` of the request being audited (``seq()``), with one
    context for the whole loop instead of one per request."""
    try:
        yield
    except Exception:
        with reading_seq(seq()):
            raise


def report_of_rows(session_id: str | None, rows: Sequence[RequestCache]) -> CacheReport:
    """The report of ``rows`` (the totals follow from them)."""
    return CacheReport(session=session_id, requests=tuple(rows), totals=_totals(rows))


def _audit_one(
    request: WalkedRequest,
    renderer: SegmentRenderer,
    stores: dict[Rule, PrefixStore],
    seen: dict[Rule, Seen],
    previous: Previous | None,
) -> tuple[RequestCache, Previous]:
    """One request's row, and what the next request compares with."""
    rule, prompt = renderer.render(
        request.header, request.nodes, appended_only=not request.replaced_since
    )
    message = request.message
    reply: Sequence[SegmentSource] = ()
    if rule == "deepseek" and message is not None:
        reply = _reply_sources(message)
    store = stores.setdefault(rule, PrefixStore())
    outcome = account(rule, prompt, store, reply=reply)
    usage = message.data.get("usage") if message is not None else None
    reset = None
    held: int | None = None
    if usage and _counts(usage, outcome.prompt, outcome.read, 0).short:
        reset = _reset_cause(request, previous)
        if reset is not None:
            held = _held(rule, store, previous)
            # The cache the log says was lost: simulate the request on an empty one.
            store.clear()
            outcome = account(rule, prompt, store, reply=reply)
    shared = seen.setdefault(rule, Seen()).shared(prompt)
    segments = prompt.segments
    extends = previous is None or (
        len(segments) >= previous.length
        and (previous.length == 0 or segments[previous.length - 1].key == previous.last_key)
    )
    if held is None and usage and (not extends or reset is not None):
        held = _held(rule, store, previous)
    counts = _counts(usage, outcome.prompt, outcome.read, shared, held or 0)
    row = _row(request, previous, rule, counts, extends, reset)
    return row, _previous(request, rule, prompt)


def _previous(request: WalkedRequest, rule: Rule, prompt: Prompt) -> Previous:
    """What the request after ``request`` (rendered as ``prompt``) compares with."""
    message = request.message
    segments = prompt.segments
    end = message.time if message is not None else request.time
    last = segments[-1].key if segments else None
    prefix = len(request.header.prefix)
    answer = derive_event_message(message) if message is not None else None
    node = (message.seq, answer) if message is not None and answer is not None else None
    return Previous(len(segments), last, end, request.nodes, prefix, node, rule, prompt)


def _resumed_previous(
    request: WalkedRequest, renderer: SegmentRenderer, chain: Mapping[str, Any] | None
) -> Previous:
    """:func:`_previous` of an audited request, its prompt taken from the
    ``chain`` kept of it, or else rendered again (either leaves ``renderer`` as
    the audit of every request up to it would)."""
    resumed = None
    if chain is not None:
        with contextlib.suppress(KeyError, TypeError, ValueError):  # an untrusted shape
            resumed = renderer.resume(request.header, request.nodes, chain)
    rule, prompt = resumed or renderer.render(request.header, request.nodes, appended_only=False)
    return _previous(request, rule, prompt)


def _held(rule: Rule, store: PrefixStore, previous: Previous | None) -> int:
    """What the previous prompt, sent again now, would read from ``store``."""
    if previous is None or previous.prompt is None or previous.rule != rule:
        return 0
    return peek(rule, previous.prompt, store).read


def _reset_cause(request: WalkedRequest, previous: Previous | None) -> CacheCause | None:
    """Why the provider's cache was empty for ``request``, when the log says so.

    A new loop instance (a ``request/header`` snapshot) in front of a cache
    that lives in the tapelog process, or an idle gap since the previous
    request longer than the provider keeps a prefix (docs/providers.md,
    "Prompt caches").
    """
    provider = request.header.config.provider
    facts = provider_cache(provider)
    snapshots = [c.event for c in request.changes if c.event.type == "request/header"]
    if facts.per_process and snapshots:
        detail = {"provider": provider, "reason": snapshots[-1].data["reason"]}
        return CacheCause(kind="new-process", seqs=(snapshots[-1].seq,), detail=detail)
    lifetime = facts.idle_lifetime_ms
    if previous is not None and lifetime is not None:
        gap = request.time - previous.end_time
        if gap > lifetime:
            detail = {"provider": provider, "gap_ms": gap, "lifetime_ms": lifetime}
            return CacheCause(kind="idle-gap", seqs=(request.boundary_seq,), detail=detail)
    return None


class _Counts(NamedTuple):
    """A request's token counts, the simulation carried over to the reported scale
    (a named tuple: two are made per audited request)."""

    prompt: int
    reported: int
    expected: int
    shared: int
    usage_logged: bool
    short: bool
    held: int = 0
    """What the previous prompt left in the cache for this one (see ``_held``)."""


def _counts(
    usage: Mapping[str, Any] | None,
    estimated_prompt: int,
    expected: int,
    shared: int,
    held: int = 0,
) -> _Counts:
    prompt = usage_prompt_tokens(usage) if usage else 0
    reported = int(usage.get("cache_read", 0)) if usage else 0
    tolerance = 0
    if usage and prompt != estimated_prompt and estimated_prompt:
        # A real tokenizer counted the prompt: carry the estimate over to its
        # scale and forgive rounding (docs/cli.md, "tapelog cache").
        expected = expected * prompt // estimated_prompt
        shared = shared * prompt // estimated_prompt
        held = held * prompt // estimated_prompt
        tolerance = max(128, expected // 20)
    short = bool(usage) and reported < expected - tolerance
    return _Counts(prompt, reported, expected, shared, bool(usage), short, min(held, prompt))


def _row(
    request: WalkedRequest,
    previous: Previous | None,
    rule: Rule,
    counts: _Counts,
    extends: bool,
    reset: CacheCause | None,
) -> RequestCache:
    causes: list[CacheCause] = []
    if not extends:
        causes = log_causes(request, previous)
        if not causes:
            causes.append(
                CacheCause(kind="unexplained", seqs=(), detail={"reason": "prefix changed"})
            )
    elif request.replaced_since:
        # The prompt extends the previous one, but a client sent the answer it
        # was shown differently (re-serialized arguments, dropped reasoning):
        # the cached answer prefix (DeepSeek stores it) is lost, and this says why.
        edit = client_edit(request, previous)
        if edit is not None:
            causes.append(edit)
    if reset is not None:
        causes.append(reset)
    if counts.short:
        detail = {
            "reason": "reported below expected",
            "reported": counts.reported,
            "expected": counts.expected,
        }
        causes.append(CacheCause(kind="unexplained", seqs=(), detail=detail))
    usage = request.message.data.get("usage") if request.message is not None else None
    verdict = provider_verdict(usage)
    drop = not extends or counts.short or reset is not None
    could = max(counts.expected, counts.held)
    return _request_cache(
        **request_fields(request),
        rule=rule,
        prompt_tokens=counts.prompt,
        cached_reported=counts.reported,
        cached_expected=counts.expected,
        shared_prefix_tokens=counts.shared,
        drop=drop,
        causes=tuple(causes),
        usage_logged=counts.usage_logged,
        provider_verdict=verdict,
        provider_agrees=agrees(verdict, causes),
        lost_tokens=max(0, could - counts.reported) if drop and counts.usage_logged else 0,
    )


_SLOTS: Final = tuple(getattr(RequestCache, f.name).__set__ for f in fields(RequestCache))
_NAMES: Final = tuple(f.name for f in fields(RequestCache))


def request_cache_of(values: Mapping[str, Any]) -> RequestCache:
    """``RequestCache(**values)`` with exactly every field given (else
    ``ValueError``), its slots set directly: a frozen dataclass's ``__init__``
    calls ``object.__setattr__`` once per field (17 here), for each row an
    audit makes or a checkpoint holds."""
    if len(values) != len(_NAMES):
        raise ValueError("a cache row names every field once")
    row: RequestCache = object.__new__(RequestCache)
    for name, slot in zip(_NAMES, _SLOTS, strict=True):
        slot(row, values[name])
    return row


def _request_cache(**values: Any) -> RequestCache:
    return request_cache_of(values)


def _totals(rows: Sequence[RequestCache]) -> CacheTotals:
    prompt = sum(r.prompt_tokens for r in rows)
    reported = sum(r.cached_reported for r in rows)
    # A request whose answer logged no usage (aborted, failed) has nothing to compare.
    expected = sum(r.cached_expected for r in rows if r.usage_logged)
    line = bottom_line(rows)
    own = reported - line.cross_session_tokens
    return CacheTotals(
        requests=len(rows),
        prompt_tokens=prompt,
        cached_reported=reported,
        cached_expected=expected,
        hit_ratio=reported / prompt if prompt else 0.0,
        efficiency=min(1.0, own / expected) if expected else 1.0,
        bottom_line=line,
    )
