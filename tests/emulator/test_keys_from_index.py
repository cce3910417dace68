"""A rule's lazy write list read from a position on: the keys a store adds."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tapelog.cache._rules import Segment, _Keys


@given(
    runs=st.lists(st.lists(st.text(min_size=1, max_size=3), max_size=5), max_size=4),
    start=st.integers(-3, 25),
)
def test_from_index_is_the_tail_of_the_keys(runs: list[list[str]], start: int) -> None:
    keys = _Keys([[Segment(k, 1) for k in run] for run in runs])
    every = [k for run in runs for k in run]
    assert list(keys.from_index(start)) == every[max(start, 0) :]
    assert list(keys) == every
