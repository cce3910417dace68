"""Python's cyclic garbage collector held back while a request is in flight.

A request on a long conversation builds a few containers as long as its
history (the translated message list, its keys, the rebuilt request), and
each young-generation pass of the collector walks every young container's
references: at 10,000 messages a pass over those lists costs about a
millisecond, and a request that allocates a few thousand objects triggers
several, all on the client's wait (measured in the served proxy: about five
young passes per request at 10,000 messages). Reference counting frees
almost everything a request leaves, so the passes find little.

:class:`GcWindow` raises the collector's first threshold from when a
request arrives until its answer's end has been sent, and restores it then:
the passes the request would have caused run once, at the first allocation
after (the turn's end bookkeeping, off the client's wait), with the
collector's usual choice of generation. Nothing is disabled: a proxy whose
requests always overlap still collects, every :data:`IN_FLIGHT_THRESHOLD`
allocations. Overlapping requests share one window (the threshold is
restored when the last one ends); a threshold of 0 (the collector turned off
by the embedding program) is left as it is.
"""

from __future__ import annotations

import gc
from typing import Final

__all__ = ["IN_FLIGHT_THRESHOLD", "GcWindow"]

IN_FLIGHT_THRESHOLD: Final = 200_000
"""The collector's first threshold while requests are in flight (CPython's
default is 700): net allocations of container objects between passes."""


class GcWindow:
    """Counts the requests in flight; the first raises the threshold, the last
    restores what it was."""

    def __init__(self, threshold: int = IN_FLIGHT_THRESHOLD) -> None:
        self.threshold = threshold
        self.open = 0
        self._saved: tuple[int, int, int] | None = None

    def enter(self) -> None:
        if not self.open:
            saved = gc.get_threshold()
            if saved[0] and saved[0] < self.threshold:
                self._saved = saved
                gc.set_threshold(self.threshold, saved[1], saved[2])
        self.open += 1

    def leave(self) -> None:
        self.open -= 1
        if not self.open and self._saved is not None:
            gc.set_threshold(*self._saved)
            self._saved = None
