"""Pausing Python's cyclic garbage collector around bulk work on a log.

Loading or auditing a log allocates hundreds of thousands of small objects
that form no reference cycles. CPython's collector runs a full pass over every
tracked object each time the number of long-lived objects grows by a quarter,
so a load that builds the heap from nothing pays several passes over all of it
(measured: a third to half of the time of loading a 21 MB log). Reference
counting still frees everything as usual while the collector is paused.

Pausing only defers the passes: whatever survives the block is still young
when the collector resumes, and is walked once per generation on its way to
the oldest, then by every full pass for as long as it lives, so a process
holding long logs pays passes that grow with them. A load's result is long
lived and acyclic (a dropped session is freed by reference counting alone), so
``paused_gc(freeze=True)`` moves what survives into the collector's permanent
generation (``gc.freeze``) instead: no later pass walks it. It freezes only
when the block succeeds; a refused log leaves nothing frozen. The freeze takes
every object then alive, so cyclic garbage not yet collected at that moment is
never collected: a cost bounded by what the process leaked between two loads,
paid for passes that no longer grow with the logs it holds.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["paused_gc"]


@contextmanager
def paused_gc(*, freeze: bool = False) -> Iterator[None]:
    """Disable the cyclic collector inside the block (nesting is fine); restore it
    after. ``freeze``: when the block succeeds, leave every object alive then out
    of all later collections (for a long-lived, acyclic result: a loaded log)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
        if freeze:
            gc.freeze()
    finally:
        if was_enabled:
            gc.enable()
