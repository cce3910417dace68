"""Loading a session file in bulk: the fast path of ``load`` and ``verify``.

:func:`scan_jsonl` and :func:`replay_events` judge a file line by line, in
Python, and name what is wrong. Most files have nothing wrong with them, and
for those the same verdict costs far less in bulk. This reads the file in
batches of lines, and for each batch:

* decodes every line with one C-level ``map`` of the decoder (a line that is
  not JSON on its own stops it);
* proves every line canonical with one comparison: the canonical encoding of
  the batch's decoded list against its lines joined by commas. As each line
  decoded on its own to one value, equal bytes mean each line equals its
  value's encoding (a line cannot end early or late: a JSON value that is a
  proper prefix of another with a comma after it would not be one value);
* replays the batch into the session (:func:`tapelog.log._bulk.replay_decoded`)
  and checks its ``log/digest`` events against the bytes before them.

A batch is dropped once replayed, so the decoded lines stay few and in the
processor's cache. Anything off the fast path (a spaced or damaged line, a bad
header, a digest that does not match, an event the replay refuses) makes it
answer ``None``, and the caller reads the file line by line, which names the
problem: the fast path never refuses, it only accepts what the slow one does,
into the same session.
"""

from __future__ import annotations

from itertools import accumulate
from typing import Any, Final

from orjson import dumps, loads

from tapelog._errors import StoreError
from tapelog.log._api import Session, replay_decoded
from tapelog.store._format import (
    DigestChain,
    JsonlScan,
    header_line,
    info_from_header,
    torn_warning,
)

__all__ = ["BATCH_BYTES", "load_jsonl_bulk"]

BATCH_BYTES: Final = 48 * 1024
"""The bytes of lines split, decoded and replayed together (about 256 lines of
a loop's log): enough that the per-batch calls cost little, few enough that
the batch's lines and decoded objects stay in the processor's cache while it
is replayed, split from the file just before (not all at once up front).
Measured on the 21 MB log of ``bench_log.py --cold 10000`` (load CPU over one
parse, best of 7, lines split up front): batches of 64 or 256 lines 4.7,
2,048 lines 6.5, the whole file at once 6.4; splitting each batch just before
it is decoded took a further 0.15 of one parse off the decoding."""


def load_jsonl_bulk(data: bytes) -> tuple[JsonlScan, Session] | None:
    """The scan and the replayed session of a session file's bytes, as
    :func:`scan_jsonl` and :func:`replay_events` make them for a file with no
    problem; ``None`` when the file is not one the fast path accepts."""
    good = data.rfind(b"\n") + 1  # the complete lines; a torn one follows
    first = data.find(b"\n")
    if first < 0:
        return None
    try:
        info = info_from_header(loads(data[:first]))
    except (ValueError, StoreError):  # not JSON, or not a header
        return None
    if header_line(info) != data[:first]:
        return None
    session = Session.from_info(info, ())
    digests = DigestChain(data, info.seed_length or 0)
    start, number = first + 1, 1  # where the batch starts, the lines before it
    while start < good:
        stop = data.rfind(b"\n", start, start + BATCH_BYTES)
        if stop < start:  # a line longer than a batch
            stop = data.index(b"\n", start)
        batch = data[start:stop].split(b"\n")
        try:
            objs = list(map(loads, batch))
        except ValueError:
            return None
        if dumps(objs) != b"[" + b",".join(batch) + b"]":
            return None
        found = replay_decoded(session, objs, batch)
        if found is None:
            return None
        if found and not _digests_match(digests, found, objs, batch, start, number):
            return None
        digests.after += len(batch) - (found[-1] + 1 if found else 0)
        start, number = stop + 1, number + len(batch)
    scan = JsonlScan(info=info, lines=number, good_size=good)
    digests.finish(scan, number)
    if good < len(data):
        scan.warnings.append(torn_warning(number + 1, len(data) - good, number - 1))
    return scan, session


def _digests_match(
    digests: DigestChain,
    found: list[int],
    objs: list[Any],
    batch: list[bytes],
    start: int,
    number: int,
) -> bool:
    """Check the ``log/digest`` events at positions ``found`` of a batch whose
    first line (line ``number + 1``) starts at byte ``start``."""
    ends = list(accumulate(len(line) + 1 for line in batch))
    done = 0
    for i in found:
        digests.after += i + 1 - done
        done = i + 1
        before = start + (ends[i - 1] if i else 0)
        line = number + i + 1
        if digests.check(line - 2, objs[i]["data"], line, before) is not None:
            return False
    return True
