"""Sessions grouped by family: a client run's main conversation, then the
sessions that forked or branched off it, each under its parent.

``tapelog sessions`` and ``tapelog serve`` list a store's sessions this way, so
the conversations one client run made (a main agent, its subagents, side
calls: proxy branches, see docs/proxy.md) read together.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

__all__ = ["in_families"]

T = TypeVar("T")


def in_families(
    items: Sequence[T], id_of: Callable[[T], str], parent_of: Callable[[T], str | None]
) -> list[tuple[int, T]]:
    """``items`` with each one's depth, every child right after its parent
    (children in their order in ``items``, reversed: oldest first when the list
    is newest first). An item whose parent is not listed is a root; roots keep
    their order. A parent cycle (a damaged store) is broken where it closes."""
    ids = {id_of(item) for item in items}
    children: dict[str, list[T]] = {}
    roots: list[T] = []
    for item in items:
        parent = parent_of(item)
        if parent is not None and parent in ids and parent != id_of(item):
            children.setdefault(parent, []).append(item)
        else:
            roots.append(item)
    out: list[tuple[int, T]] = []
    placed: set[str] = set()

    def place(item: T, depth: int) -> None:
        stack = [(item, depth)]
        while stack:
            node, level = stack.pop()
            key = id_of(node)
            if key in placed:
                continue
            placed.add(key)
            out.append((level, node))
            # pushed newest first, so the oldest child is placed first
            stack.extend((child, level + 1) for child in children.get(key, ()))

    for root in roots:
        place(root, 0)
    for item in items:  # members of a cycle: no root leads to them
        if id_of(item) not in placed:
            place(item, 0)
    return out
