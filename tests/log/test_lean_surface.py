"""The surface's position index: lean while the nodes are in seq order, the
same answers as a full index after any sequence of appends and replaces."""

from __future__ import annotations

import sys

from hypothesis import given
from hypothesis import strategies as st

from tapelog.log._surface import Replace, Surface

# An op: append the next seq, or replace the nodes at positions [i, j] (taken
# modulo the surface's length) by the next seq.
_OPS = st.lists(
    st.one_of(
        st.just(None),
        st.tuples(st.integers(0, 40), st.integers(0, 40)),
    ),
    max_size=60,
)


def _apply_all(ops: list[tuple[int, int] | None]) -> tuple[Surface, list[int]]:
    surface, reference = Surface(), []
    for seq, op in enumerate(ops):
        if op is None or not reference:
            surface.apply(seq, None)
            reference.append(seq)
        else:
            i, j = sorted((op[0] % len(reference), op[1] % len(reference)))
            surface.apply(seq, Replace(reference[i], reference[j]))
            reference[i : j + 1] = [seq]
    return surface, reference


@given(_OPS)
def test_positions_equal_a_full_index(ops: list[tuple[int, int] | None]) -> None:
    surface, reference = _apply_all(ops)
    index = {n: i for i, n in enumerate(reference)}
    assert surface.nodes == reference
    last = max(reference, default=0)
    for seq in range(last + 3):
        assert surface.position(seq) == index.get(seq)
    copy = surface.copy()
    copy.apply(last + 1, None)
    assert copy.position(last + 1) == len(reference)
    assert surface.position(last + 1) is None  # the copy is independent


def test_an_append_only_surface_keeps_no_index_per_node() -> None:
    """Appends keep the nodes in seq order: positions come from a bisection,
    not from a dict entry (and an int) per node."""
    small, large = Surface(), Surface()
    for seq in range(10):
        small.apply(seq, None)
    for seq in range(10_000):
        large.apply(seq * 3, None)
    held = sys.getsizeof(large._pos) - sys.getsizeof(small._pos)
    assert held == 0
    assert large.position(2_997 * 3) == 2_997
    assert large.position(2_997 * 3 + 1) is None
