"""Reading a log without making what a reader would drop: a field or two of a
payload, and the runs of streamed chunks a walk only counts.

``Event.data`` of a packed event (``PackedEvent``) decodes its payload bytes
and freezes the result, every time it is read: right for a reader that keeps
or hands out the data. A reader that only looks at one field of many events
(the request walk reads ``turn`` and ``step`` of every ``step/start`` and
``sent`` of every ``step/end``) pays for the freeze and drops it. :func:`peek_data`
gives the payload as plain decoded JSON: the same values, nothing frozen, not to
be kept or changed.

Likewise a reader of every event (the request walk) makes a ``PackedEvent``
for each record, though most of a long log's events are ones it looks no
further into than their type: streamed chunks (about half of them: "a chunk,
not an error"), ``turn/end``, ``tool/call``, ``tool/approval``, ``log/digest``.
:func:`iter_event_runs` hands those over as runs of their records, read off
the record's type and kind bytes, and every other event as
:func:`tapelog.log._events.iter_events` does.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator, Mapping
from typing import Any, Final

from tapelog.log._canonical import decode_raw
from tapelog.log._events import (
    _KIND_LIST,
    _TYPE_CODES,
    RECORD_TYPES,
    Event,
    PackedEvent,
    _new,
    _set_record,
    _set_seq,
    _set_type,
    _set_unchecked,
)
from tapelog.log._record_blocks import RecordBlock

__all__ = ["iter_event_runs", "peek_data"]

_CHUNK_CODE: Final = _TYPE_CODES["assistant/chunk"]
_LOOKED_INTO: Final = ("", "error")
"""Chunk kinds a run never holds: an error (a failed attempt, counted) and a
kind the record does not name (read from its payload)."""
_RUN_CODES: Final = frozenset(
    _TYPE_CODES[t] for t in ("turn/end", "tool/call", "tool/approval", "log/digest")
)
"""Other types a run holds: what the walk reads of them is their type."""


def peek_data(event: Event) -> Mapping[str, Any]:
    """``event.data``, read for a look: a packed event's payload bytes decoded
    (never frozen: do not keep or change it), any other event's own data."""
    if type(event) is PackedEvent:
        data: Mapping[str, Any] = decode_raw(event._payload())
        return data
    return event.data


def iter_event_runs(items: list[Event | bytes | RecordBlock]) -> Iterator[Event | list[bytes]]:
    """The events of a fold's items in order (the first at seq 0), except that
    each run of events next to each other that are ``assistant/chunk`` whose
    records name their kind, other than ``error``, or of :data:`_RUN_CODES`'
    types comes as one list of their records (a new list each time, the
    caller's to keep); every other record (also one sealed in a
    :class:`RecordBlock`) made into its :class:`PackedEvent`."""
    new, set_seq, set_type, set_record, set_unchecked = (
        _new,
        _set_seq,
        _set_type,
        _set_record,
        _set_unchecked,
    )
    types, kinds, chunk, looked_into = RECORD_TYPES, _KIND_LIST, _CHUNK_CODE, _LOOKED_INTO
    others = _RUN_CODES
    run: list[bytes] = []
    block, seqs, ends, joined, i = None, [0], [0], b"", 0
    for seq, item in enumerate(items):
        if type(item) is RecordBlock:
            # A block's records are read in seq order: each one after the last.
            if item is not block or i == len(seqs) or seqs[i] != seq:
                block = item
                seqs, ends, joined = item.decoded()
                i = bisect_left(seqs, seq)
                if i == len(seqs) or seqs[i] != seq:
                    raise KeyError(seq)  # as RecordBlock.record: not in the block
            item = joined[ends[i - 1] if i else 0 : ends[i]]
            i += 1
        if type(item) is bytes:
            code = item[0] & 0x7F
            if code == chunk:
                if kinds[item[1]] not in looked_into:
                    run.append(item)
                    continue
            elif code in others:
                run.append(item)
                continue
            if run:
                yield run
                run = []
            event = new(PackedEvent)
            set_seq(event, seq)
            set_type(event, types[code])
            set_record(event, item)
            set_unchecked(event, None)
            yield event
        else:
            if run:
                yield run
                run = []
            yield item  # type: ignore[misc]
    if run:
        yield run
