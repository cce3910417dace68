"""Properties of the pure cache rules, plus the store's TTL."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from tapelog.cache._api import CacheOutcome, PrefixStore, Segment, SegmentSource, chain_segments
from tapelog.cache._rules import anthropic_rule, deepseek_rule, openai_rule

# A tiny identity alphabet makes equal segments (shared prefixes) common.
sources = st.builds(
    SegmentSource,
    identity=st.sampled_from([b"a", b"b", b"c"]),
    tokens=st.integers(0, 700),
    breakpoint=st.booleans(),
)
source_lists = st.lists(sources, min_size=1, max_size=30)


def _chain(items: Sequence[SegmentSource]) -> list[Segment]:
    return chain_segments("rule:model", items)


def _total(segments: Sequence[Segment]) -> int:
    return sum(s.tokens for s in segments)


def _all_rules(prompt: list[Segment], stored: set[str]) -> list[CacheOutcome]:
    return [
        deepseek_rule(prompt, stored),
        openai_rule(prompt, stored),
        anthropic_rule(prompt, stored),
    ]


@settings(max_examples=150, deadline=None)
@given(source_lists, source_lists)
def test_counts_are_disjoint_and_bounded_by_the_prompt(
    first: list[SegmentSource], second: list[SegmentSource]
) -> None:
    stored = set(deepseek_rule(_chain(first), set()).writes)
    stored |= set(anthropic_rule(_chain(first), set()).writes)
    prompt = _chain(second)
    for outcome in _all_rules(prompt, stored):
        assert outcome.prompt == _total(prompt)
        assert 0 <= outcome.read <= outcome.prompt
        assert outcome.write >= 0
        assert outcome.uncached >= 0
        assert outcome.read + outcome.write + outcome.uncached == outcome.prompt


@settings(max_examples=100, deadline=None)
@given(source_lists, source_lists)
def test_rules_are_deterministic(first: list[SegmentSource], second: list[SegmentSource]) -> None:
    stored = set(deepseek_rule(_chain(first), set()).writes)
    assert _chain(second) == _chain(second)
    assert _all_rules(_chain(second), stored) == _all_rules(_chain(second), stored)


@settings(max_examples=150, deadline=None)
@given(source_lists, st.lists(sources, max_size=30), st.sampled_from([16, 64, 128]))
def test_deepseek_append_extension_caches_at_least_the_previous_prompt(
    first: list[SegmentSource], more: list[SegmentSource], unit: int
) -> None:
    before = _chain(first)
    stored = set(deepseek_rule(before, set(), unit=unit).writes)
    after = _chain([*first, *more])
    assert deepseek_rule(after, stored, unit=unit).read >= unit * (_total(before) // unit)


@settings(max_examples=150, deadline=None)
@given(source_lists, st.lists(sources, max_size=30))
def test_openai_append_extension_caches_at_least_the_previous_prompt(
    first: list[SegmentSource], more: list[SegmentSource]
) -> None:
    before = _chain(first)
    stored = set(openai_rule(before, set()).writes)
    floor = 0 if _total(before) < 1024 else 128 * (_total(before) // 128)
    assert openai_rule(_chain([*first, *more]), stored).read >= floor


@settings(max_examples=150, deadline=None)
@given(source_lists, st.lists(sources, max_size=20))
def test_anthropic_extension_within_lookback_reads_the_previous_breakpoint(
    first: list[SegmentSource], more: list[SegmentSource]
) -> None:
    # Request 1 ends on a breakpoint; request 2 appends at most 20 blocks and puts
    # its own breakpoint on its last block: it reads at least request 1's prefix.
    first = [*first[:-1], SegmentSource(first[-1].identity, first[-1].tokens, True)]
    before = _chain(first)
    stored = set(anthropic_rule(before, set()).writes)
    tail = [*more[:-1], SegmentSource(more[-1].identity, more[-1].tokens, True)] if more else []
    after = _chain([*first, *tail])
    expected = _total(before) if _total(before) >= 1024 else 0
    assert anthropic_rule(after, stored).read >= expected


@given(source_lists)
def test_a_different_first_segment_shares_nothing(items: list[SegmentSource]) -> None:
    stored = set(deepseek_rule(_chain(items), set(), unit=1).writes)
    changed = [SegmentSource(b"other", items[0].tokens), *items[1:]]
    assert deepseek_rule(_chain(changed), stored, unit=1).read == 0


def test_deepseek_reads_whole_units_of_the_longest_stored_prefix() -> None:
    prompt = _chain([SegmentSource(b"a", 100), SegmentSource(b"b", 100), SegmentSource(b"c", 5)])
    stored = {prompt[1].key}  # 200 tokens stored
    outcome = deepseek_rule(prompt, stored, unit=64)
    assert (outcome.read, outcome.uncached, outcome.hits) == (192, 13, (prompt[1].key,))


def test_openai_caches_nothing_below_1024_shared_tokens() -> None:
    prompt = _chain([SegmentSource(b"a", 1023), SegmentSource(b"b", 500)])
    assert openai_rule(prompt, {prompt[0].key}).read == 0
    longer = _chain([SegmentSource(b"a", 1024), SegmentSource(b"b", 500)])
    assert openai_rule(longer, {longer[0].key}).read == 1024


def test_anthropic_lookback_reaches_exactly_20_blocks() -> None:
    head = SegmentSource(b"head", 2000)
    blocks = [SegmentSource(bytes([i]), 1) for i in range(21)]
    # A write after "head"; the breakpoint 20 blocks later still finds it ...
    near = _chain([head, *blocks[:19], SegmentSource(b"end", 1, True)])
    assert anthropic_rule(near, {near[0].key}).read == 2000
    # ... one block further and it does not: everything is written again.
    far = _chain([head, *blocks[:20], SegmentSource(b"end", 1, True)])
    outcome = anthropic_rule(far, {far[0].key})
    assert (outcome.read, outcome.write) == (0, 2021)


def test_anthropic_writes_nothing_below_the_minimum() -> None:
    prompt = _chain([SegmentSource(b"a", 1000, True), SegmentSource(b"b", 10)])
    outcome = anthropic_rule(prompt, set(), minimum=1024)
    assert (outcome.write, outcome.uncached, outcome.writes) == (0, 1010, ())


def test_store_expires_entries_after_ttl_and_hits_refresh_them() -> None:
    now = [0.0]
    store = PrefixStore(ttl_seconds=300, clock=lambda: now[0])
    prompt = _chain([SegmentSource(b"a", 2000, True)])
    store.apply(anthropic_rule(prompt, store))
    now[0] = 200.0
    hit = anthropic_rule(prompt, store)
    assert hit.read == 2000
    store.apply(hit)  # refreshed at t=200
    now[0] = 450.0
    assert prompt[0].key in store
    now[0] = 800.0
    assert prompt[0].key not in store
    assert anthropic_rule(prompt, store).read == 0


def test_store_without_ttl_never_evicts() -> None:
    now = [0.0]
    store = PrefixStore(clock=lambda: now[0])
    prompt = _chain([SegmentSource(b"a", 10)])
    store.apply(deepseek_rule(prompt, store))
    now[0] = 1e9
    assert prompt[0].key in store
    assert len(store) == 1
