"""Events: the envelope, the vocabulary and payload validation.

An event is a frozen record. Its JSON form has the keys ``seq``, ``time``,
``type``, ``data`` and, on surface events only, ``surface_op`` and optionally
``source_seqs`` -- in that order, because the log's bytes are part of what an
auditor checks. The payload rules here are the minimum each type must carry;
docs/format.md is the catalog.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from tapelog._errors import EventError
from tapelog.log._canonical import decode, encode, encode_trusted
from tapelog.log._freeze import FrozenDict, FrozenList, freeze, freeze_decoded
from tapelog.log._payloads import check_blocks, check_payload, chunk_shape_ok
from tapelog.log._record_blocks import RecordBlock

__all__ = [
    "EVENT_TYPES",
    "PACKED_TYPES",
    "RECORD_TYPES",
    "SESSION_FORMAT_VERSION",
    "SURFACE_TYPES",
    "UNPROJECTED",
    "Event",
    "PackedChunk",
    "PackedEvent",
    "check_blocks",
    "check_packed",
    "check_payload",
    "chunk_kind",
    "chunk_shape_ok",
    "event_from_json",
    "event_from_line",
    "item_from_line",
    "iter_events",
    "pack_event",
    "pack_logged",
    "pack_record",
    "unpack_record",
    "unpack_unchecked",
]

SESSION_FORMAT_VERSION: Final = 0

UNPROJECTED: Final[Any] = type("Unprojected", (), {"__repr__": lambda self: "UNPROJECTED"})()
"""What an event holds before its message is projected (``None`` is a result)."""

SURFACE_TYPES: Final = frozenset(
    {"user/message", "context/message", "assistant/message", "tool/result"}
)

EVENT_TYPES: Final = frozenset(
    {
        "turn/start",
        "turn/end",
        "step/start",
        "step/end",
        "user/message",
        "context/message",
        "assistant/chunk",
        "assistant/message",
        "tool/call",
        "tool/approval",
        "tool/result",
        "request/header",
        "request/header-delta",
        "compact/start",
        "compact/summary",
        "compact/end",
        "session/end-seed",
        "session/origin",
        "log/digest",
    }
)


@dataclass(frozen=True, slots=True, eq=False)
class Event:
    """One logged event. Build events with ``Session.append``, not by hand.

    Two events are equal when their envelopes are (a :class:`PackedEvent` and
    the plain event it stands for are equal).
    """

    seq: int
    time: int
    type: str
    data: FrozenDict
    surface_op: str | FrozenDict | None = None
    source_seqs: FrozenList | None = None
    _message: Any = field(default=UNPROJECTED, init=False, repr=False, compare=False)
    """The message a surface event projects to, once made (see
    ``derive_event_message``): every fold of the log shares it."""

    @property
    def is_surface(self) -> bool:
        return self.surface_op is not None

    def to_json(self) -> FrozenDict:
        """The envelope as an ordered JSON object (the exact on-disk form)."""
        out: dict[str, Any] = {
            "seq": self.seq,
            "time": self.time,
            "type": self.type,
            "data": self.data,
        }
        if self.surface_op is not None:
            out["surface_op"] = self.surface_op
            if self.source_seqs is not None:
                out["source_seqs"] = self.source_seqs
        return FrozenDict(out)

    def encode(self) -> bytes:
        """Canonical JSON bytes of the envelope (one log line, without newline)."""
        return encode(self.to_json())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Event):
            return NotImplemented
        if self is other:
            return True
        if type(self) is PackedEvent and type(other) is PackedEvent:
            return self.encode() == other.encode()
        return (
            self.seq == other.seq
            and self.time == other.time
            and self.type == other.type
            and self.surface_op == other.surface_op
            and self.source_seqs == other.source_seqs
            and self.data == other.data
        )

    def __hash__(self) -> int:
        return hash((self.seq, self.time, self.type))


PACKED_TYPES: Final = frozenset(
    {
        "assistant/chunk",
        "tool/call",
        "tool/approval",
        "step/start",
        "step/end",
        "turn/start",
        "turn/end",
        "log/digest",
    }
)
"""Event types a session keeps as their log line (:class:`PackedEvent`): the
many small events that shape no request (not surface, not header) and are read
back rarely. Chunks above all: one per streamed piece."""


class PackedEvent(Event):
    """An event of :data:`PACKED_TYPES` as a compact record, ``data`` decoded on access.

    A session's fold keeps such an event as its record alone (one ``bytes``:
    type and chunk-kind codes, time, then the payload's canonical bytes) and
    makes a :class:`PackedEvent` over it when the event is read
    (:func:`unpack_record`): no object per event is held for the many small
    events that shape no request. The rest of the line (``{"seq":..,
    "time":..,"type":"..","data":`` and the closing brace) is the same
    canonical text for every such event, rebuilt by :meth:`encode`. It is an
    :class:`Event` in every way that can be observed: ``time`` and ``data``
    (read from the record; ``data`` a fresh frozen copy on each access),
    equality, ``encode()``;
    reading one seq twice gives two equal objects, not one. Build one with
    :func:`pack_event`, which validates the payload first.
    """

    __slots__ = ("_record", "_unchecked")

    _record: bytes
    _unchecked: Mapping[str, Any] | None

    # Never set on a packed event: read from the class (the slots stay empty).
    surface_op = None
    source_seqs = None
    _message = None  # not a surface event: it projects to nothing

    @property
    def time(self) -> int:
        record = self._record
        if record[0] < 0x80:
            time: int = _HEAD.unpack_from(record)[2]
            return time
        return int(record[2 : record.index(0, 2)])

    @property
    def _kind(self) -> str:
        return _KIND_LIST[self._record[1]]

    @property
    def data(self) -> FrozenDict:
        decoded: FrozenDict = freeze_decoded(decode(self._payload()))
        return decoded

    def _payload(self) -> bytes:
        record = self._record
        return record[10:] if record[0] < 0x80 else record[record.index(0, 2) + 1 :]

    def encode(self) -> bytes:
        # The envelope of a packed event has four keys in this order, two ints
        # and a type from PACKED_TYPES (plain ASCII): its canonical text is this.
        return b'{"seq":%d,"time":%d,"type":"%s","data":%s}' % (
            self.seq,
            self.time,
            _TYPE_BYTES[self.type],
            self._payload(),
        )


PackedChunk = PackedEvent
"""The name of a packed event when it is an ``assistant/chunk``."""

# A record is ``<type code><kind code><time: int64 LE><payload>``; a time
# outside int64 (valid JSON all the same) is kept as ``<type code | 0x80><kind
# code><time in decimal>\0<payload>`` (canonical JSON never holds a NUL byte).
_HEAD: Final = struct.Struct("<BBq")
RECORD_TYPES: Final = tuple(sorted(PACKED_TYPES))
"""The event type of each type code of a record (``RECORD_TYPES[record[0] & 0x7F]``)."""
_TYPE_CODES: Final = {t: i for i, t in enumerate(RECORD_TYPES)}
_TYPE_BYTES: Final = {t: t.encode() for t in PACKED_TYPES}
_KIND_LIST: list[str] = [""]  # chunk kinds seen, by code; code 0: none, or too many kinds
_KIND_CODES: dict[str, int] = {"": 0}
_INT64: Final = range(-(2**63), 2**63)


def _kind_code(kind: str) -> int:
    code = _KIND_CODES.get(kind)
    if code is None:
        if len(_KIND_LIST) > 255:
            return 0  # read back from the payload (chunk_kind)
        code = _KIND_CODES[kind] = len(_KIND_LIST)
        _KIND_LIST.append(kind)
    return code


def pack_event(obj: Mapping[str, Any], line: bytes, *, checked: bool = False) -> PackedEvent:
    """A :class:`PackedEvent` for the decoded envelope ``obj`` of a line of one
    of :data:`PACKED_TYPES` and its canonical bytes ``line``.

    ``obj`` must be lossless JSON (from :func:`tapelog.log.decode`, or a
    validated event's ``to_json()``). Unless the caller just checked the
    payload (``checked``), the decoded payload is kept until a ``Session``
    replays the event and checks it in its turn (after the seq, as for any
    event), then let go of; :func:`check_packed` does that.
    """
    event = _new(PackedEvent)
    _set_seq(event, obj["seq"])
    record = pack_record(obj, line)
    _set_type(event, RECORD_TYPES[record[0] & 0x7F])
    _set_record(event, record)
    _set_unchecked(event, None if checked else obj["data"])
    return event


def pack_record(obj: Mapping[str, Any], line: bytes) -> bytes:
    """The record a fold keeps for the packed event with decoded envelope
    ``obj`` and canonical line ``line`` (see :class:`PackedEvent`)."""
    # The payload's bytes: from the envelope's own ``,"data":`` (the first in
    # the line: seq and time are ints and a packed type has no comma) to the
    # closing brace.
    payload = line[line.index(b',"data":') + 8 : -1]
    return _record(obj["type"], obj["time"], obj["data"], payload)


def pack_logged(event: Event) -> PackedEvent:
    """The :class:`PackedEvent` of a validated event of :data:`PACKED_TYPES`
    that is not one yet (a live append): its payload encoded on its own, no
    envelope built or encoded."""
    packed = _new(PackedEvent)
    _set_seq(packed, event.seq)
    _set_type(packed, event.type)
    _set_record(packed, _record(event.type, event.time, event.data, encode_trusted(event.data)))
    _set_unchecked(packed, None)
    return packed


def _record(etype: str, time: int, data: Mapping[str, Any], payload: bytes) -> bytes:
    # A load's bulk path (``_bulk.replay_decoded``) builds the int64 form inline.
    kind = 0
    if etype == "assistant/chunk":
        chunk = data.get("chunk")
        # JSON objects here are dicts (decoded) or FrozenDicts (frozen data).
        found = chunk.get("kind") if isinstance(chunk, dict) else None
        if type(found) is str:
            kind = _KIND_CODES.get(found) or _kind_code(found)
    if time in _INT64:
        return _HEAD.pack(_TYPE_CODES[etype], kind, time) + payload
    return b"%c%c%d\0%s" % (_TYPE_CODES[etype] | 0x80, kind, time, payload)


def unpack_unchecked(seq: int, record: bytes, data: Mapping[str, Any]) -> PackedEvent:
    """:func:`unpack_record` for a record a load just made, with its decoded
    payload ``data`` still to check (as :func:`pack_event` leaves it)."""
    event = unpack_record(seq, record)
    _set_unchecked(event, data)
    return event


def unpack_record(seq: int, record: bytes) -> PackedEvent:
    """The :class:`PackedEvent` at ``seq`` over its record (a fold's item)."""
    event = _new(PackedEvent)
    _set_seq(event, seq)
    _set_type(event, RECORD_TYPES[record[0] & 0x7F])
    _set_record(event, record)
    _set_unchecked(event, None)
    return event


def iter_events(items: list[Event | bytes | RecordBlock], start: int = 0) -> Iterator[Event]:
    """The events of a fold's items in order (the first at seq ``start``), each
    record (also one sealed in a :class:`RecordBlock`) made into its
    :class:`PackedEvent` (:func:`unpack_record`, inlined: a walk of a long log
    reads every one)."""
    new, set_seq, set_type, set_record, set_unchecked = (
        _new,
        _set_seq,
        _set_type,
        _set_record,
        _set_unchecked,
    )
    types = RECORD_TYPES
    for seq, item in enumerate(items, start):
        if type(item) is RecordBlock:
            item = item.record(seq)
        if type(item) is bytes:
            event = new(PackedEvent)
            set_seq(event, seq)
            set_type(event, types[item[0] & 0x7F])
            set_record(event, item)
            set_unchecked(event, None)
            yield event
        else:
            yield item  # type: ignore[misc]


# A packed event is made per line of a load and per read of a fold: its slots
# are set through their descriptors directly (what object.__setattr__ would
# find, without the lookup).
_new = object.__new__
_set_seq = Event.__dict__["seq"].__set__
_set_type = Event.__dict__["type"].__set__
_set_record = PackedEvent.__dict__["_record"].__set__
_set_unchecked = PackedEvent.__dict__["_unchecked"].__set__


def check_packed(event: PackedEvent) -> None:
    """Check the payload a packed event was built with, once (see :func:`pack_event`)."""
    pending = event._unchecked
    if pending is not None:
        check_payload(event.type, pending)
        _set_unchecked(event, None)


def chunk_kind(event: Event) -> str:
    """The ``kind`` of an ``assistant/chunk`` event's chunk, without decoding a packed one."""
    if isinstance(event, PackedEvent) and event._kind:
        return event._kind
    kind: str = event.data["chunk"]["kind"]
    return kind


_ENVELOPE_KEYS: Final = ("seq", "time", "type", "data", "surface_op", "source_seqs")
_VALID_KEY_ORDERS: Final = frozenset({_ENVELOPE_KEYS[:4], _ENVELOPE_KEYS[:5], _ENVELOPE_KEYS})


def event_from_line(obj: Any, line: bytes) -> Event | None:
    """:func:`event_from_json` for the store's hot path: ``obj`` just decoded
    from ``line``, which is exactly its canonical encoding. The event when the
    envelope is well formed (the common case, checked without building an error
    location), else ``None``: :func:`event_from_json` then says what is wrong."""
    item = item_from_line(obj, line)
    if type(item) is bytes:
        return unpack_unchecked(obj["seq"], item, obj["data"])
    return item  # type: ignore[return-value]


def item_from_line(obj: Any, line: bytes) -> Event | bytes | None:
    """:func:`event_from_line` without an object for a packed event: its record
    (:func:`pack_record`; the caller keeps ``obj["data"]`` to check and
    ``obj["seq"]``, which a record does not hold)."""
    if type(obj) is not dict:
        return None
    n = len(obj)
    if tuple(obj) not in _VALID_KEY_ORDERS:
        return None
    seq, time, etype, data = obj["seq"], obj["time"], obj["type"], obj["data"]
    if (
        type(seq) is not int
        or seq < 0
        or type(time) is not int
        or type(etype) is not str
        or etype not in EVENT_TYPES
        or type(data) is not dict
    ):
        return None
    if n == 4:
        if etype in PACKED_TYPES:
            return pack_record(obj, line)
        return Event(seq, time, etype, freeze_decoded(data))
    surface_op = obj["surface_op"]
    source_seqs = obj["source_seqs"] if n == 6 else None
    if surface_op is None or (n == 6 and source_seqs is None):
        return None  # an explicit null: refused with its reason
    return Event(
        seq,
        time,
        etype,
        freeze_decoded(data),
        freeze_decoded(surface_op),
        None if source_seqs is None else freeze_decoded(source_seqs),
    )


def event_from_json(
    obj: Any,
    *,
    where: str = "event",
    decoded: bool = False,
    line: bytes | None = None,
    canonical: bool = False,
) -> Event:
    """Build an :class:`Event` from its JSON form, checking the envelope shape.

    This checks what an event is on its own (keys, key order, types, known
    type); whether it fits its log (seq contiguity, legal replaces) is checked
    by ``Session`` when the event is replayed. ``decoded=True`` says ``obj``
    came straight from :func:`tapelog.log.decode`, which only yields lossless
    JSON, so freezing may skip the per-value checks (the store's hot path);
    with it, ``line`` (the raw bytes ``obj`` was decoded from) lets an event of
    :data:`PACKED_TYPES` be kept packed (:class:`PackedEvent`, its canonical
    bytes) instead of as objects; ``canonical=True`` says the caller checked
    that ``line`` is exactly the canonical encoding of ``obj``.
    """
    if type(obj) is not dict and not isinstance(obj, Mapping):
        raise EventError(f"{where}: an event must be a JSON object, got {type(obj).__name__}")
    if tuple(obj) not in _VALID_KEY_ORDERS:  # the fast path: one tuple lookup
        keys = list(obj.keys())
        unknown = [k for k in keys if k not in _ENVELOPE_KEYS]
        if unknown:
            raise EventError(f"{where}: unknown envelope key {unknown[0]!r}")
        expected = [k for k in _ENVELOPE_KEYS if k in obj]
        if keys != expected:
            raise EventError(f"{where}: envelope keys must be in the order {', '.join(expected)}")
        for key in ("seq", "time", "type", "data"):
            if key not in obj:
                raise EventError(f"{where}: envelope is missing {key!r}")
    seq, time, etype, data = obj["seq"], obj["time"], obj["type"], obj["data"]
    if type(seq) is not int or seq < 0:
        raise EventError(f"{where}: seq must be a non-negative integer, got {seq!r}")
    if type(time) is not int:
        raise EventError(f"{where}: time must be an integer (epoch ms), got {time!r}")
    if not isinstance(etype, str) or etype not in EVENT_TYPES:
        raise EventError(
            f"{where}: unknown event type {etype!r}; this version of tapelog reads "
            f"format version {SESSION_FORMAT_VERSION} types only"
        )
    if type(data) is not dict and not isinstance(data, Mapping):
        raise EventError(f"{where}: data must be a JSON object")
    for key in ("surface_op", "source_seqs"):
        # An explicit null would be dropped when the event is written again,
        # so the stored line and the event would no longer match byte for byte.
        if key in obj and obj[key] is None:
            raise EventError(f"{where}: {key} must be left out rather than null")
    surface_op = obj.get("surface_op")
    source_seqs = obj.get("source_seqs")
    if (
        decoded
        and line is not None
        and etype in PACKED_TYPES
        and surface_op is None
        and source_seqs is None
    ):
        if canonical:
            return pack_event(obj, line)
        return pack_event(obj, encode_trusted(obj))  # a record is copied out of it
    if decoded and type(data) is dict:
        return Event(
            seq=seq,
            time=time,
            type=etype,
            data=freeze_decoded(data),
            surface_op=None if surface_op is None else freeze_decoded(surface_op),
            source_seqs=None if source_seqs is None else freeze_decoded(source_seqs),
        )
    return Event(
        seq=seq,
        time=time,
        type=etype,
        data=freeze(data, path="data"),
        surface_op=None if surface_op is None else freeze(surface_op, path="surface_op"),
        source_seqs=None if source_seqs is None else freeze(source_seqs, path="source_seqs"),
    )
