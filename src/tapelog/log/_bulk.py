"""Replaying a batch of decoded log lines in one pass: the load's fast path.

A load's per-event cost is Python work: an envelope check, a record, a payload
check, the structural rules and the fold, each a call or more per event. This
does the same for a batch of lines a store has already decoded and proved
canonical in bulk (``store/_jsonl_bulk.py``), in one loop per batch:

* an ``assistant/chunk`` (over half of a log's events) in its common shape,
  inside the open step, is checked inline and kept as its record, with no
  object and no call per chunk (the open step is read once per run of chunks:
  :meth:`LogRules.chunk_gate`);
* any other event of a packed type is checked by the same payload check and
  rules as ``Session._replay`` runs, and kept as its record (a ``turn/*`` or
  ``step/*`` marker with no event object either);
* a message appended to the surface is frozen, checked and folded as
  ``check_event`` and ``Session._commit`` would, without their general steps
  (a replace's surface check, a header fold);
* every other event is made as the per-line path makes it
  (:func:`event_from_line`) and replayed through ``Session._replay``: the
  same checks, the same code.

It never judges on its own what the per-line path would refuse: anything off
the fast path that the full replay would refuse makes it answer ``None``, and
the store then reads the log line by line, which names the problem. So a log
that loads here loads the same way there, into the same session.
"""

from __future__ import annotations

from struct import error as StructError
from typing import Any, Final

from tapelog._errors import JsonValueError, LogError
from tapelog.log._events import (
    _HEAD,
    _KIND_CODES,
    _TYPE_CODES,
    SURFACE_TYPES,
    Event,
    _kind_code,
    check_payload,
    event_from_line,
    pack_record,
    unpack_record,
)
from tapelog.log._freeze import freeze_decoded
from tapelog.log._session import Session

__all__ = ["replay_decoded"]

_ENVELOPE: Final = ("seq", "time", "type", "data")
_APPENDED: Final = (*_ENVELOPE, "surface_op")
_SOURCED: Final = (*_APPENDED, "source_seqs")
_APPENDS: Final = frozenset({_APPENDED, _SOURCED})
_CHUNK: Final = "assistant/chunk"
_CHUNK_CODE: Final = _TYPE_CODES[_CHUNK]
_OPEN: Final = b"{"
"""Where a packed line's payload starts: its first ``{`` after the envelope's
own (the seq and time are integers, a packed type's name has no brace)."""
_DIGEST: Final = "log/digest"
_MARKERS: Final = frozenset({"turn/start", "turn/end", "step/start", "step/end"})


def replay_decoded(session: Session, objs: list[Any], lines: list[bytes]) -> list[int] | None:
    """Replay ``lines`` (each exactly the canonical encoding of the same
    position of ``objs``, which were decoded from them) at ``session``'s next
    seqs; return the positions of the ``log/digest`` events among them (for
    the store to check against the bytes), or ``None`` when a line is not what
    a valid log holds there. After ``None`` the session is half replayed: the
    caller drops it and reads the log line by line instead."""
    fold = session._fold
    items = fold.items
    rules = session._rules
    replay = session._replay
    seed = session.info.seed_length
    kinds, codes, pack = _KIND_CODES, _TYPE_CODES, _HEAD.pack
    first = seq = len(items)
    gate = rules.chunk_gate()
    digests: list[int] = []
    try:
        for obj, raw in zip(objs, lines, strict=True):
            keys = tuple(obj)  # not a dict: an error below, or other keys
            if keys == _ENVELOPE:
                s, t, etype, d = obj["seq"], obj["time"], obj["type"], obj["data"]
                if s != seq or type(s) is not int or type(t) is not int or type(d) is not dict:
                    return None
                if etype == _CHUNK and seq != seed:
                    # A missing field raises: such a chunk is refused line by line.
                    c, turn, step = d["chunk"], d["turn"], d["step"]
                    if (
                        type(c) is dict
                        and type(kind := c["kind"]) is str
                        and type(turn) is int
                        and type(step) is int
                        and (gate is True or (gate and turn == gate[0] and step == gate[1]))
                    ):
                        # The record of ``_events._record`` (a time outside int64
                        # raises: line by line), inlined: a call per chunk shows.
                        kcode = kinds.get(kind) or _kind_code(kind)
                        items.append(pack(_CHUNK_CODE, kcode, t) + raw[raw.index(_OPEN, 1) : -1])
                        seq += 1
                        continue
                code = codes.get(etype)
                if code is not None:  # packed: checked as ``Session._replay`` checks it
                    check_payload(etype, d)
                    rules.check_at(etype, seq, None, d)
                    if code == _CHUNK_CODE:  # a chunk off the common path: its kind's code
                        record = pack_record(obj, raw)
                    else:
                        record = pack(code, 0, t) + raw[raw.index(_OPEN, 1) : -1]
                    items.append(record)
                    if etype in _MARKERS:  # a turn's or a step's bounds: no object either
                        rules.apply_marker(etype, seq, d)
                    else:  # a tool call's event is kept by the rules' ledger
                        rules.apply(unpack_record(seq, record), d)
                        if etype == _DIGEST:
                            digests.append(seq - first)
                    gate = rules.chunk_gate()
                    seq += 1
                    continue
            elif keys in _APPENDS and obj["surface_op"] == "append":
                # A message appended to the surface: checked as ``check_event``
                # checks it (an append needs no surface check, moves no header).
                s, t, etype, d = obj["seq"], obj["time"], obj["type"], obj["data"]
                if s != seq or type(s) is not int or type(t) is not int or type(d) is not dict:
                    return None
                if etype not in SURFACE_TYPES:
                    return None
                sources = obj.get("source_seqs")
                if sources is not None:  # earlier seqs (``None``: absent; null is refused)
                    if type(sources) is not list or not all(
                        type(x) is int and 0 <= x < seq for x in sources
                    ):
                        return None
                    sources = freeze_decoded(sources)
                elif len(keys) == 6:
                    return None
                data = freeze_decoded(d)
                check_payload(etype, data)
                rules.check_at(etype, seq, "append", data)
                appended = Event(s, t, etype, data, "append", sources)
                fold.apply_folded(appended, fold.header)
                rules.apply(appended, data)
                gate = rules.chunk_gate()
                seq += 1
                continue
            event = event_from_line(obj, raw)  # any other: as the line-by-line path makes it
            if event is None or event.seq != seq:
                return None
            replay(event)
            gate = rules.chunk_gate()
            seq += 1
    except (LogError, JsonValueError, TypeError, KeyError, ValueError, StructError):
        return None
    return digests
