"""Packed events' records, sealed into compressed blocks once a session is past them.

A session keeps each event of ``PACKED_TYPES`` as its record (see
:class:`tapelog.log._events.PackedEvent`): one ``bytes`` per streamed chunk,
tool call or step marker, about five per history message, the largest share of
what a long session holds. Nothing reads them on a warm step once their step
ended; they are kept only to be read back (``session.events``, a fork, an
export, an audit). So a session seals the records it appended live, once they
add up to :data:`BLOCK_BYTES`, into one :class:`RecordBlock`: their bytes
joined and compressed (zlib), with the seq and length of each. Every sealed
seq's slot in the fold's list then holds that one block, and a read of the seq
gets its record back from it, byte for byte (:meth:`RecordBlock.record`).

A read decompresses the block once and keeps the result on the block while it
is one of the last :data:`DECODED_KEPT` blocks read, so a walk of the log in
either direction decompresses each block once. The log on disk is unchanged:
this is how memory holds it, nothing else.
"""

from __future__ import annotations

import threading
import zlib
from array import array
from bisect import bisect_left
from collections import deque
from collections.abc import Iterable, Sequence
from itertools import accumulate
from operator import sub
from typing import Any, Final

__all__ = ["BLOCK_BYTES", "CHECK_EVERY", "DECODED_KEPT", "LooseRecords", "RecordBlock"]

BLOCK_BYTES: Final = 64 * 1024
"""Record bytes sealed into one block: large enough that compression finds the
records' common structure, small enough that reading one record back costs
little (about 0.1 ms to decompress)."""

DECODED_KEPT: Final = 2
"""Decompressed blocks kept at once (the last ones read)."""

CHECK_EVERY: Final = 64
"""Events appended between two counts of the loose records."""

_LEVEL: Final = 1  # zlib's fastest: a seal runs inside an append
_decoded_lock = threading.Lock()
_decoded: deque[RecordBlock] = deque()


class RecordBlock:
    """Records of packed events, compressed together (see the module docstring).

    The records' bytes are joined and compressed; beside them, each record's
    seq (as the step from the one before: a byte each, as a rule) and length
    (two bytes each, as a rule), uncompressed: deflate is slow on such arrays
    and gains little on them. Nothing else is held per record while the block
    is not being read.
    """

    __slots__ = ("_decoded", "_first", "_lengths", "_packed", "_steps")

    def __init__(self, seqs: Sequence[int], records: Sequence[bytes]) -> None:
        self._first = seqs[0] if seqs else 0
        self._steps = _compact(map(sub, seqs[1:], seqs), "B")
        self._lengths = _compact(map(len, records), "H")
        self._packed = zlib.compress(b"".join(records), _LEVEL)
        self._decoded: tuple[list[int], list[int], bytes] | None = None

    def __len__(self) -> int:
        return len(self._lengths)

    @property
    def size(self) -> int:
        """The bytes held (compressed records, seq steps and lengths)."""
        return len(self._packed) + _held(self._steps) + _held(self._lengths)

    def record(self, seq: int) -> bytes:
        """The record of the event at ``seq`` (``KeyError`` if not in this block)."""
        seqs, ends, joined = self.decoded()
        i = bisect_left(seqs, seq)
        if i == len(seqs) or seqs[i] != seq:
            raise KeyError(seq)
        return joined[ends[i - 1] if i else 0 : ends[i]]

    def decoded(self) -> tuple[list[int], list[int], bytes]:
        """The seqs of the records, the end of each in the joined bytes, and the
        joined bytes (a reader of every record in order: see
        :func:`tapelog.log._peek.iter_event_runs`)."""
        return self._decoded or self._decode()

    def _decode(self) -> tuple[list[int], list[int], bytes]:
        seqs = list(accumulate(self._steps, initial=self._first))[: len(self._lengths)]
        decoded = (seqs, list(accumulate(self._lengths)), zlib.decompress(self._packed))
        self._decoded = decoded
        with _decoded_lock:
            _decoded.append(self)
            while len(_decoded) > DECODED_KEPT:
                _decoded.popleft()._decoded = None
        return decoded


def _compact(values: Iterable[int], typecode: str) -> array[int]:
    """``values`` as an array of ``typecode`` if every one fits, else of ``I``."""
    kept = list(values)
    try:
        return array(typecode, kept)
    except OverflowError:
        return array("I", kept)


def _held(values: array[int]) -> int:
    return len(values) * values.itemsize


class LooseRecords:
    """The records a session appended live and has not sealed yet.

    The session asks :meth:`check` once it appended the event at seq
    :attr:`check_at` (every :data:`CHECK_EVERY` events: a compare per append,
    the records counted in one pass). Those counted by an earlier check are sealed once
    they reach :data:`BLOCK_BYTES`: each of their slots in ``items`` (the
    fold's list) is given the block that holds them all. The last check's stay
    loose (a reader looking back a few events, for the open turn or step, finds
    them without decompressing a block), and what a load put in the list before
    the first live append is left as it is (a resumed session's first step
    stays what is new plus the load).
    """

    __slots__ = ("_bytes", "_items", "_recent", "_recent_bytes", "_scanned", "_seqs", "check_at")

    def __init__(self, items: list[Any]) -> None:
        self._items = items
        self._seqs: list[int] = []  # counted before the last check: to seal
        self._bytes = 0
        self._recent: list[int] = []  # counted by the last check
        self._recent_bytes = 0
        self._scanned = -1  # where the next check starts counting (-1: no live append yet)
        self.check_at = 0
        """The seq whose append makes :meth:`check` due."""

    def check(self) -> None:
        """Count the records appended since the last check; seal those of
        earlier checks once they add up to :data:`BLOCK_BYTES`."""
        items = self._items
        end = len(items)
        start = self._scanned if self._scanned >= 0 else end - 1
        recent: list[int] = []
        size = 0
        for seq in range(start, end):
            item = items[seq]
            if type(item) is bytes:
                recent.append(seq)
                size += len(item)
        self._seqs += self._recent
        self._bytes += self._recent_bytes
        self._recent, self._recent_bytes = recent, size
        self._scanned = end
        self.check_at = end + CHECK_EVERY - 1
        if self._bytes >= BLOCK_BYTES:
            self.seal()

    def seal(self) -> None:
        """Seal the records counted before the last check into one block
        (readers see the same bytes)."""
        seqs, items = self._seqs, self._items
        if not seqs:
            return
        block = RecordBlock(seqs, [items[seq] for seq in seqs])
        for seq in seqs:
            items[seq] = block
        self._seqs, self._bytes = [], 0
