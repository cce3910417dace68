"""Where a session's bytes go per history message; prints one JSON object.

    .venv/bin/python bench/memory_where.py [--wire openai|anthropic] [--no-check]
        [--from N] [--to N] [--top K]

``bench/bench_memory.py`` says how much one more history message costs; this
says what it is made of. It grows ``bench_memory``'s session (the same
workload, the same ``Agent`` and ``InstantClient``) to ``--from`` messages,
takes a ``tracemalloc`` snapshot, grows it to ``--to`` and takes another: the
difference, grouped by the source line that allocated what is still held and
divided by the messages added, is the cost of a message by where it was made
(the interpreter, imports and anything made once cancel out). ``lines`` are
the ``--top`` largest; ``total`` is the sum over all lines. ``tracemalloc``
counts what Python asked of its allocator, so ``total`` is somewhat below the
peak RSS growth ``bench_memory`` reports (allocator slack, the last step's
transient body); it runs the session several times slower than without it.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import tracemalloc
from pathlib import Path
from typing import Any

from bench_memory import MEMORY_WIRES, Grower

from tapelog.log._api import encode_str

_ROOT = str(Path(__file__).resolve().parent.parent)


async def _snapshots(
    wire: str, check: bool, sizes: tuple[int, int]
) -> list[tuple[tracemalloc.Snapshot, int, int]]:
    """The session grown to each size in turn, with a snapshot at each."""
    grower = Grower(wire, check)
    out: list[tuple[tracemalloc.Snapshot, int, int]] = []
    for size in sizes:
        session = await grower.grow(size)
        gc.collect()
        out.append((tracemalloc.take_snapshot(), len(session.surface), len(session.events)))
    return out


def where(wire: str, check: bool, sizes: tuple[int, int], top: int) -> dict[str, Any]:
    tracemalloc.start(1)
    try:
        (before, m0, e0), (after, m1, e1) = asyncio.run(_snapshots(wire, check, sizes))
    finally:
        tracemalloc.stop()
    grown = m1 - m0
    stats = after.compare_to(before, "lineno")

    def place(stat: tracemalloc.StatisticDiff) -> str:
        frame = stat.traceback[0]
        return f"{frame.filename.removeprefix(_ROOT + '/')}:{frame.lineno}"

    return {
        "wire": wire,
        "check": check,
        "messages": [m0, m1],
        "events_per_message": round((e1 - e0) / grown, 2),
        "total_bytes_per_message": round(sum(s.size_diff for s in stats) / grown),
        "lines": [
            {
                "bytes_per_message": round(s.size_diff / grown, 1),
                "objects_per_message": round(s.count_diff / grown, 2),
                "where": place(s),
            }
            for s in stats[:top]
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--wire", choices=MEMORY_WIRES, default="openai")
    parser.add_argument("--no-check", action="store_true", help="the checker off")
    parser.add_argument("--from", dest="start", type=int, default=1_000)
    parser.add_argument("--to", dest="stop", type=int, default=3_000)
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args()
    if not 0 < args.start < args.stop:
        sys.exit("--from must be positive and below --to")
    result = where(args.wire, not args.no_check, (args.start, args.stop), args.top)
    print(encode_str(result))


if __name__ == "__main__":
    main()
