"""``in_families``: sessions grouped under their parents (``tapelog sessions``, serve)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tapelog.store._api import in_families

Item = tuple[str, str | None]


@st.composite
def forests(draw: st.DrawFn) -> list[Item]:
    """Items ``(id, parent)``: parents among the ids (earlier or later ones, itself,
    a cycle) or unknown ids."""
    count = draw(st.integers(0, 12))
    ids = [f"s{i}" for i in range(count)]
    choices = st.one_of(st.none(), st.sampled_from([*ids, "gone"])) if ids else st.none()
    return [(i, draw(choices)) for i in ids]


@given(forests())
def test_every_item_once_each_child_right_under_its_parent(items: list[Item]) -> None:
    placed = in_families(items, lambda x: x[0], lambda x: x[1])
    assert sorted(x[0] for _, x in placed) == sorted(x[0] for x in items)
    position = {x[0]: n for n, (_, x) in enumerate(placed)}
    depth = {x[0]: d for d, x in placed}
    for d, (sid, parent) in placed:
        if d:
            assert parent is not None
            assert position[parent] < position[sid]
            assert depth[parent] == d - 1
            # everything between the parent and this child is under the parent too
            between = placed[position[parent] + 1 : position[sid]]
            assert all(e >= d for e, _ in between)
    ids = {x[0] for x in items}
    roots = [x for x in items if x[1] is None or x[1] not in ids or x[1] == x[0]]
    assert [x for d, x in placed if x in roots] == roots  # in their order, at depth 0
    assert all(depth[x[0]] == 0 for x in roots)


def test_children_oldest_first_under_a_newest_first_list() -> None:
    items = [("c2", "p"), ("other", None), ("c1", "p"), ("p", None), ("g", "c1")]
    placed = [(d, x[0]) for d, x in in_families(items, lambda x: x[0], lambda x: x[1])]
    assert placed == [(0, "other"), (0, "p"), (1, "c1"), (2, "g"), (1, "c2")]
