"""Two histories of one log, aligned: which messages a client sent differently.

A client behind ``tapelog proxy`` sends its whole history with every request;
the proxy logs a ``replace`` from the first message it changed and re-appends
the rest as new nodes. :func:`history_changes` compares the history of the
request before with the one after by content, so re-sent unchanged messages
are no change and messages added at the end are the conversation growing, and
classifies each changed message with :func:`tapelog.audit._edits.message_change`.
Pure, and linear in the histories' lengths.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Any, Final

from tapelog.audit._edits import MessageChange, message_change, message_text
from tapelog.log._api import encode_trusted as encode

__all__ = ["HistoryChanges", "history_changes"]

Node = tuple[int, Mapping[str, Any]]

_ALIGN_CELLS: Final = 250_000
"""Above this many (old x new) message pairs, the middle is paired by position:
difflib's alignment is quadratic when many messages are alike."""
_ANCHORS: Final = 8


def _anchor(old: Sequence[bytes], new: Sequence[bytes]) -> tuple[int, int]:
    """``(t, p)``: the last ``t`` old messages are ``new[p - t : p]`` (``t == 0``: none).

    What follows ``p`` is the conversation growing. Candidates for ``p`` are the
    old length (nothing removed or inserted) and the last places the old last
    message occurs; the best keeps the longest old tail with the fewest
    messages removed or inserted before it. Linear in the two lengths.
    """
    size = len(old)
    candidates = [size] if size <= len(new) else []
    for p in range(len(new), 0, -1):
        if len(candidates) > _ANCHORS:
            break
        if new[p - 1] == old[-1] and p not in candidates:
            candidates.append(p)
    best = (0, 0, 0, 0)  # score, -imbalance, t, p
    for p in candidates:
        t = 0
        while t < size and t < p and old[size - 1 - t] == new[p - 1 - t]:
            t += 1
        imbalance = abs(size - p)
        best = max(best, (t - imbalance, -imbalance, t, p))
    return (best[2], best[3]) if best[2] else (0, 0)


def _opcodes(
    old: Sequence[bytes], new: Sequence[bytes]
) -> Sequence[tuple[str, int, int, int, int]]:
    if len(old) * len(new) <= _ALIGN_CELLS:
        return SequenceMatcher(None, old, new, autojunk=False).get_opcodes()
    pairs, a, b = min(len(old), len(new)), len(old), len(new)
    return [
        ("replace", 0, pairs, 0, pairs),
        ("delete", pairs, a, pairs, pairs),
        ("insert", a, a, pairs, b),
    ]


@dataclass(frozen=True, slots=True)
class HistoryChanges:
    """The messages a client sent differently, the first ``limit`` of them classified."""

    changes: tuple[MessageChange, ...]
    total: int
    """How many messages changed, were removed or inserted (classified or not)."""


def _removed(message: int, node: Node) -> MessageChange:
    seq, a = node
    role = str(a.get("role"))
    return MessageChange(
        message=message, role=role, seq=seq, by=None, what="removed", old=message_text(a)
    )


def _inserted(message: int, node: Node) -> MessageChange:
    by, b = node
    role = str(b.get("role"))
    return MessageChange(
        message=message, role=role, seq=None, by=by, what="inserted", new=message_text(b)
    )


def history_changes(
    old: Sequence[Node],
    new: Sequence[Node],
    *,
    old_base: int = 0,
    new_base: int = 0,
    limit: int | None = None,
) -> HistoryChanges:
    """The messages of ``new`` that differ from ``old`` (two histories of one log).

    Nodes are ``(seq, neutral message)``. Both histories are aligned by
    content, so messages the client sent unchanged after an edited one (logged
    again as new nodes) are no change, and messages added at the end are the
    conversation growing, not an edit. ``*_base`` is the number of messages
    before the history (the header's prefix), so positions count them. Only
    the first ``limit`` changes are classified; ``total`` counts them all.

    Cost: one encoding per message after the common prefix, a linear search
    for where the old history's unchanged tail went, and an alignment of what
    lies between (by position when that is large).
    """
    common = 0
    for (s, m), (t, n) in zip(old, new, strict=False):
        if s != t and encode(m) != encode(n):
            break
        common += 1
    old_rest, new_rest = old[common:], new[common:]
    if not old_rest:
        return HistoryChanges((), 0)
    old_keys = [encode(m) for _, m in old_rest]
    new_keys = [encode(m) for _, m in new_rest]
    tail, end = _anchor(old_keys, new_keys)
    if tail:  # align only what lies before the old history's unchanged tail
        old_keys, new_keys = old_keys[: len(old_keys) - tail], new_keys[: end - tail]
    changes: list[MessageChange] = []
    total = 0
    room = limit if limit is not None else len(old_keys) + len(new_keys)
    old_at, new_at = old_base + common + 1, new_base + common + 1
    for tag, i1, i2, j1, j2 in _opcodes(old_keys, new_keys):
        if tag == "equal":
            continue
        pairs = min(i2 - i1, j2 - j1)
        for k in range(pairs):
            if old_keys[i1 + k] == new_keys[j1 + k]:
                continue
            total += 1
            if len(changes) < room:
                (seq, a), (by, b) = old_rest[i1 + k], new_rest[j1 + k]
                change = message_change(a, b, message=new_at + j1 + k, seq=seq, by=by)
                assert change is not None  # the encodings differ
                changes.append(change)
        for i in range(i1 + pairs, i2):
            total += 1
            if len(changes) < room:
                changes.append(_removed(old_at + i, old_rest[i]))
        if not tail and i2 == len(old_keys):
            continue  # after the end of the old history: the conversation growing
        for j in range(j1 + pairs, j2):
            total += 1
            if len(changes) < room:
                changes.append(_inserted(new_at + j, new_rest[j]))
    return HistoryChanges(tuple(changes), total)
