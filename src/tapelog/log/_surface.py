"""The surface: the ordered list of message-producing events.

A surface event either appends a node or replaces a contiguous run of nodes
``{"op": "replace", "start": S, "end": E}`` (seqs of nodes on the current
surface, S not after E). Replace is how compaction shadows history without
deleting it; a single-node replace of a ``tool/result`` by a ``tool/result``
with the same ``call_id`` is tool-result trimming. Every replace bumps
``replace_generation``. Validation is separate from application so a bad op
never leaves anything behind.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from tapelog._errors import SurfaceError

__all__ = ["Replace", "Surface"]


@dataclass(frozen=True, slots=True)
class Replace:
    start: int
    end: int


def parse_surface_op(op: Any) -> Replace | None:
    """``None`` for append, a :class:`Replace` for a replace op; errors otherwise."""
    if op == "append":
        return None
    if isinstance(op, Mapping):
        if set(op) != {"op", "start", "end"} or op.get("op") != "replace":
            raise SurfaceError(
                'surface_op must be "append" or {"op": "replace", "start": S, "end": E}'
            )
        start, end = op["start"], op["end"]
        if type(start) is not int or type(end) is not int:
            raise SurfaceError("surface_op replace start and end must be integer seqs")
        return Replace(start, end)
    raise SurfaceError(f'surface_op must be "append" or a replace object, got {op!r}')


class Surface:
    """Surface nodes (event seqs) in order, with a position index.

    While every node was appended (the common case), the nodes are in seq
    order and a position is found by bisection: no index entry (and no int)
    is held per node. A replace may put its new, higher seq before older
    nodes; from then on a dict indexes the positions.
    """

    __slots__ = ("_nodes", "_pos", "replace_generation")

    def __init__(self) -> None:
        self._nodes: list[int] = []
        self._pos: dict[int, int] | None = None  # None: nodes in seq order
        self.replace_generation = 0

    def copy(self) -> Surface:
        """An independent surface with the same nodes (for a fold's copy)."""
        out = Surface()
        out._nodes = self._nodes[:]
        out._pos = None if self._pos is None else self._pos.copy()
        out.replace_generation = self.replace_generation
        return out

    @property
    def nodes(self) -> list[int]:
        """A copy of the node seqs, in surface order."""
        return list(self._nodes)

    def __len__(self) -> int:
        return len(self._nodes)

    def node_at(self, index: int) -> int:
        return self._nodes[index]

    def nodes_from(self, index: int) -> list[int]:
        return self._nodes[index:]

    def position(self, seq: int) -> int | None:
        """The index of node ``seq`` on the surface, ``None`` if it is not one."""
        if self._pos is not None:
            return self._pos.get(seq)
        nodes = self._nodes
        i = bisect_left(nodes, seq)
        return i if i < len(nodes) and nodes[i] == seq else None

    def check(
        self,
        op: Replace | None,
        etype: str,
        data: Mapping[str, Any],
        data_of: Callable[[int], tuple[str, Mapping[str, Any]]],
    ) -> None:
        """Raise :class:`SurfaceError` if ``op`` cannot be applied now."""
        if op is None:
            return
        s, e = self.position(op.start), self.position(op.end)
        if s is None:
            raise SurfaceError(f"replace start seq {op.start} is not on the current surface")
        if e is None:
            raise SurfaceError(f"replace end seq {op.end} is not on the current surface")
        if s > e:
            raise SurfaceError(
                f"replace start seq {op.start} comes after end seq {op.end} on the surface"
            )
        if etype == "tool/result":
            old_type, old = data_of(op.start)
            if op.start != op.end or old_type != "tool/result":
                raise SurfaceError(
                    "a tool/result may only replace a single tool/result node (trimming)"
                )
            if old.get("call_id") != data.get("call_id"):
                raise SurfaceError(
                    f"trimming must keep call_id {old.get('call_id')!r}, "
                    f"got {data.get('call_id')!r}"
                )
            changed = sorted(
                k for k in set(old) | set(data) if k != "content" and old.get(k) != data.get(k)
            )
            if changed:
                raise SurfaceError(
                    f"trimming may change only content; {', '.join(changed)} changed"
                )

    def apply(self, seq: int, op: Replace | None) -> None:
        """Apply an op that :meth:`check` accepted."""
        nodes = self._nodes
        if op is None:  # a new event's seq is above every node: order is kept
            if self._pos is not None:
                self._pos[seq] = len(nodes)
            nodes.append(seq)
            return
        s, e = self.position(op.start), self.position(op.end)
        assert s is not None  # check() said so
        assert e is not None
        # Replacing the last nodes of an ordered surface keeps it ordered.
        ordered = self._pos is None and e == len(nodes) - 1
        nodes[s : e + 1] = [seq]
        if not ordered:
            ordered = all(a < b for a, b in pairwise(nodes))
        self._pos = None if ordered else {n: i for i, n in enumerate(nodes)}
        self.replace_generation += 1
