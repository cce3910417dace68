"""Body assembly from pre-encoded pieces, and the per-node piece cache.

A wire body is canonical JSON (``tapelog.log.encode``: compact, key order as
written). Compact JSON composes: the encoding of an object is ``{``, each
member as ``"key":value`` joined by ``,``, then ``}``. So a body can be built by
concatenating the bytes of its parts, and the bytes of each history message can
be computed once per surface node and reused on every later step (DESIGN §8):
a step costs what is new, not a re-encode of the whole history.

:class:`BodyCache` holds those per-node pieces for one wire configuration. It
is keyed by event seq and checks that the message object is the one it saw;
a new ``replace_generation`` (compaction, trimming) or another wire
configuration clears it. The cache never changes the bytes: the tests prove
that cached assembly equals a straight encode of the same body object.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from tapelog.log import encode

__all__ = ["BodyCache", "json_array", "json_object", "node_seq_list"]

T = TypeVar("T")

# Pieces of nodes that left the surface are dropped once the cache holds this
# many more entries than the current request has nodes.
_SLACK = 64


def json_object(members: Iterable[tuple[str, bytes]]) -> bytes:
    """Canonical bytes of an object whose member values are already encoded."""
    return b"{" + b",".join(encode(key) + b":" + value for key, value in members) + b"}"


def json_array(items: Iterable[bytes]) -> bytes:
    """Canonical bytes of an array whose items are already encoded."""
    return b"[" + b",".join(items) + b"]"


def node_seq_list(messages: Sequence[Any], node_seqs: Sequence[int | None]) -> list[int | None]:
    """The node seq of each message (``None`` for prefix messages or when unknown).

    ``LlmRequest.node_seqs`` is aligned with ``messages`` (``None`` for prefix
    messages); a tuple that only covers the history is aligned from the end.
    Anything else is ignored: the body is then encoded without the cache.
    """
    if len(node_seqs) == len(messages):
        return list(node_seqs)
    if 0 < len(node_seqs) < len(messages):
        return [None] * (len(messages) - len(node_seqs)) + list(node_seqs)
    return [None] * len(messages)


class BodyCache:
    """Per-surface-node wire pieces for one wire configuration.

    Give one cache to one adapter (or loop) and pass it to
    ``wire.encode_body(request, cache=cache)``; call :meth:`sync` with the
    session's ``replace_generation`` when it is known. Without a cache the
    wire encodes everything, with the same bytes.
    """

    def __init__(self) -> None:
        self._entries: dict[int, tuple[Mapping[str, Any], Any]] = {}
        self._generation: int | None = None
        self._key: object = None
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()

    def sync(self, generation: int) -> None:
        """Forget every piece when the surface's replace generation moved."""
        if generation != self._generation:
            self._entries.clear()
            self._generation = generation

    def bind(self, key: object) -> None:
        """Use the cache for the wire configuration ``key`` (another key clears it)."""
        if key != self._key:
            self._entries.clear()
            self._key = key

    def piece(self, seq: int | None, message: Mapping[str, Any], make: Callable[[], T]) -> T:
        """The cached piece of node ``seq``, or ``make()`` stored for next time.

        A node whose message object differs from the one cached (neither the
        same object nor equal) is re-encoded: the cache can go stale only by
        being wrong about identity, and equality guards that.
        """
        if seq is None:
            return make()
        entry = self._entries.get(seq)
        if entry is not None and (entry[0] is message or entry[0] == message):
            self.hits += 1
            value: T = entry[1]
            return value
        self.misses += 1
        made = make()
        self._entries[seq] = (message, made)
        return made

    def prune(self, live: Iterable[int | None]) -> None:
        """Drop pieces of nodes that are no longer in requests, when many piled up."""
        keep = {seq for seq in live if seq is not None}
        if len(self._entries) > len(keep) + _SLACK:
            for seq in [s for s in self._entries if s not in keep]:
                del self._entries[seq]
