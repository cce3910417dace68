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
from typing import Final

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

__all__ = ["BATCH_LINES", "load_jsonl_bulk"]

BATCH_LINES: Final = 256
"""Lines decoded and replayed together: enough that the per-batch calls cost
little, few enough that the decoded batch stays in the processor's cache while
it is replayed. Measured on the 21 MB log of ``bench_log.py --cold 10000``
(load CPU over one parse, best of 7): 64 lines 4.7, 256 lines 4.7, 2,048
lines 6.5, the whole file in one batch 6.4."""


def load_jsonl_bulk(data: bytes) -> tuple[JsonlScan, Session] | None:
    """The scan and the replayed session of a session file's bytes, as
    :func:`scan_jsonl` and :func:`replay_events` make them for a file with no
    problem; ``None`` when the file is not one the fast path accepts."""
    lines = data.split(b"\n")
    torn = lines.pop()  # b"" when the file ends with a newline
    if not lines:
        return None
    try:
        info = info_from_header(loads(lines[0]))
    except (ValueError, StoreError):  # not JSON, or not a header
        return None
    if header_line(info) != lines[0]:
        return None
    session = Session.from_info(info, ())
    digests = DigestChain(data, info.seed_length or 0)
    offset = len(lines[0]) + 1  # where the batch starts in the file
    for start in range(1, len(lines), BATCH_LINES):
        batch = lines[start : start + BATCH_LINES]
        try:
            objs = list(map(loads, batch))
        except ValueError:
            return None
        if dumps(objs) != b"[" + b",".join(batch) + b"]":
            return None
        found = replay_decoded(session, objs, batch)
        if found is None:
            return None
        ends = list(accumulate(len(line) + 1 for line in batch)) if found else ()
        done = 0
        for i in found:
            digests.after += i + 1 - done
            done = i + 1
            before = offset + (ends[i - 1] if i else 0)
            if digests.check(start + i - 1, objs[i]["data"], start + i + 1, before) is not None:
                return None
        digests.after += len(batch) - done
        offset += sum(map(len, batch)) + len(batch)
    scan = JsonlScan(info=info, lines=len(lines), good_size=len(data) - len(torn))
    digests.finish(scan, len(lines))
    if torn:
        scan.warnings.append(torn_warning(len(lines) + 1, len(torn), len(lines) - 1))
    return scan, session
