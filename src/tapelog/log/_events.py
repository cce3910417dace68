"""Events: the envelope, the vocabulary and payload validation.

An event is a frozen record. Its JSON form has the keys ``seq``, ``time``,
``type``, ``data`` and, on surface events only, ``surface_op`` and optionally
``source_seqs`` -- in that order, because the log's bytes are part of what an
auditor checks. The payload rules here are the minimum each type must carry;
docs/format.md is the catalog.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from tapelog._errors import EventError
from tapelog.log._canonical import decode, encode, encode_trusted
from tapelog.log._freeze import FrozenDict, FrozenList, freeze, freeze_decoded

__all__ = [
    "EVENT_TYPES",
    "PACKED_TYPES",
    "SESSION_FORMAT_VERSION",
    "SURFACE_TYPES",
    "Event",
    "PackedChunk",
    "PackedEvent",
    "check_blocks",
    "check_packed",
    "check_payload",
    "chunk_kind",
    "event_from_json",
    "exact_bytes",
    "pack_chunk",
    "pack_event",
]

SESSION_FORMAT_VERSION: Final = 0

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
        "tool/result",
        "request/header",
        "request/header-delta",
        "compact/start",
        "compact/summary",
        "compact/end",
        "session/end-seed",
        "log/digest",
    }
)

HEADER_REASONS: Final = ("initial", "resume", "fallback")


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
    """An event kept as its canonical log line, its ``data`` decoded on access.

    A session keeps every event of :data:`PACKED_TYPES` this way: the bytes it
    is written as take about a third of the memory of the decoded objects. It
    is an :class:`Event` in every way that can be observed: ``data`` (a fresh
    frozen copy on each access), equality, ``encode()``. Build one with
    :func:`pack_event`, which validates the payload first.
    """

    __slots__ = ("_kind", "_line", "_unchecked")

    _line: bytes
    _kind: str
    _unchecked: Mapping[str, Any] | None

    @property
    def data(self) -> FrozenDict:
        decoded: FrozenDict = freeze_decoded(decode(self._line)["data"])
        return decoded

    def encode(self) -> bytes:
        return self._line


PackedChunk = PackedEvent
"""The name of a packed event when it is an ``assistant/chunk``."""


def pack_event(obj: Mapping[str, Any], line: bytes, *, checked: bool = False) -> PackedEvent:
    """A :class:`PackedEvent` for the decoded envelope ``obj`` of a line of one
    of :data:`PACKED_TYPES` and its canonical bytes ``line``.

    ``obj`` must be lossless JSON (from :func:`tapelog.log.decode`, or a
    validated event's ``to_json()``). Unless the caller just checked the
    payload (``checked``), the decoded payload is kept until a ``Session``
    replays the event and checks it in its turn (after the seq, as for any
    event), then let go of; :func:`check_packed` does that.
    """
    etype = obj["type"]
    data = obj["data"]
    event = object.__new__(PackedEvent)
    object.__setattr__(event, "seq", obj["seq"])
    object.__setattr__(event, "time", obj["time"])
    object.__setattr__(event, "type", _TYPES[etype])
    object.__setattr__(event, "surface_op", None)
    object.__setattr__(event, "source_seqs", None)
    object.__setattr__(event, "_line", line)
    object.__setattr__(event, "_unchecked", None if checked else data)
    chunk = data.get("chunk") if etype == "assistant/chunk" else None
    kind = chunk.get("kind") if isinstance(chunk, Mapping) else None
    kind = kind if isinstance(kind, str) else ""
    object.__setattr__(event, "_kind", _KINDS.setdefault(kind, kind))
    return event


def check_packed(event: PackedEvent) -> None:
    """Check the payload a packed event was built with, once (see :func:`pack_event`)."""
    pending = event._unchecked
    if pending is not None:
        check_payload(event.type, pending)
        object.__setattr__(event, "_unchecked", None)


pack_chunk = pack_event

_TYPES: Final = {t: t for t in PACKED_TYPES}  # the shared string of each packed type
_KINDS: dict[str, str] = {}  # one string object per chunk kind, shared by every packed chunk


def exact_bytes(data: bytes) -> bytes:
    """``data`` in an exact-size buffer (``orjson.dumps`` results keep a much
    larger one, and a packed event lives as long as its session)."""
    return memoryview(data).tobytes()


def chunk_kind(event: Event) -> str:
    """The ``kind`` of an ``assistant/chunk`` event's chunk, without decoding a packed one."""
    if isinstance(event, PackedEvent) and event._kind:
        return event._kind
    kind: str = event.data["chunk"]["kind"]
    return kind


_ENVELOPE_KEYS: Final = ("seq", "time", "type", "data", "surface_op", "source_seqs")
_VALID_KEY_ORDERS: Final = frozenset({_ENVELOPE_KEYS[:4], _ENVELOPE_KEYS[:5], _ENVELOPE_KEYS})


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
        encoded = encode_trusted(obj)
        return pack_event(obj, line if encoded == line else exact_bytes(encoded))
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


# --- payload rules -----------------------------------------------------------


def _fail(etype: str, message: str) -> EventError:
    return EventError(f"{etype}: {message}")


def _need(etype: str, data: Mapping[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    if key not in data:
        raise _fail(etype, f"data.{key} is required")
    value = data[key]
    if type(value) is kind:  # the common case: exactly the expected JSON type
        return value
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if kind is int or int in kinds:
        ok = isinstance(value, kinds) and not isinstance(value, bool)
    else:
        ok = isinstance(value, kinds)
    if not ok:
        names = " or ".join(_KIND_NAMES.get(k, k.__name__) for k in kinds)
        raise _fail(etype, f"data.{key} must be {names}, got {_json_type(value)}")
    return value


_KIND_NAMES: Final[dict[type, str]] = {
    int: "an integer",
    str: "a string",
    bool: "a boolean",
    dict: "an object",
    list: "a list",
}


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"


def _check_source(etype: str, data: Mapping[str, Any]) -> None:
    source = _need(etype, data, "source", dict)
    if not isinstance(source.get("kind"), str) or not source["kind"]:
        raise _fail(etype, "data.source.kind must be a non-empty string")


_BLOCK_FIELDS: Final[dict[str, tuple[tuple[str, type | tuple[type, ...]], ...]]] = {
    "text": (("text", str),),
    "reasoning": (("text", str),),
    "tool_call": (("id", str), ("name", str), ("arguments", str)),
    "tool_result": (("tool_call_id", str), ("content", (str, list)), ("is_error", bool)),
    "image": (("media_type", str),),
}


def check_blocks(content: Any, where: str) -> None:
    """Check a list of content blocks (see docs/format.md, "Content blocks")."""
    if not isinstance(content, list):
        raise EventError(f"{where} must be a list of content blocks, got {_json_type(content)}")
    for i, block in enumerate(content):
        at = f"{where}[{i}]"
        if not isinstance(block, dict):
            raise EventError(f"{at} must be an object, got {_json_type(block)}")
        btype = block.get("type")
        fields = _BLOCK_FIELDS.get(btype) if isinstance(btype, str) else None
        if fields is None:
            raise EventError(
                f"{at}.type must be one of {', '.join(sorted(_BLOCK_FIELDS))}, got {btype!r}"
            )
        for key, kind in fields:
            if key not in block:
                raise EventError(f"{at}.{key} is required in a {btype} block")
            if not isinstance(block[key], kind):
                raise EventError(f"{at}.{key} has the wrong type ({_json_type(block[key])})")
        if btype == "reasoning":
            for key in ("signature", "data"):
                if key in block and not isinstance(block[key], str):
                    raise EventError(f"{at}.{key} must be a string")
        elif btype == "tool_result" and isinstance(block["content"], list):
            check_blocks(block["content"], f"{at}.content")
        elif btype == "image" and not isinstance(block.get("data", block.get("url")), str):
            raise EventError(f"{at} needs a base64 'data' string or a 'url' string")


def _turn(etype: str, data: Mapping[str, Any]) -> None:
    _need(etype, data, "turn", int)


def _turn_end(etype: str, data: Mapping[str, Any]) -> None:
    _need(etype, data, "turn", int)
    reason = _need(etype, data, "reason", dict)
    if not isinstance(reason.get("kind"), str) or not reason["kind"]:
        raise _fail(etype, "data.reason.kind must be a non-empty string")


def _step(etype: str, data: Mapping[str, Any]) -> None:
    _need(etype, data, "turn", int)
    _need(etype, data, "step", int)


def _optional(etype: str, data: Mapping[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    """``data[key]`` checked like :func:`_need` when present (``None`` when absent)."""
    return _need(etype, data, key, kind) if key in data else None


def _check_error(etype: str, data: Mapping[str, Any]) -> None:
    error = _optional(etype, data, "error", dict)
    if error is not None and not isinstance(error.get("message", ""), str):
        raise _fail(etype, "data.error.message must be a string")


def _step_end(etype: str, data: Mapping[str, Any]) -> None:
    _step(etype, data)
    _optional(etype, data, "sent", bool)
    _check_error(etype, data)


_USAGE_COUNTS: Final = ("input", "cache_read", "cache_write", "output", "reasoning")


def _check_usage(etype: str, usage: Any, where: str) -> None:
    """Normalised usage: every count present is a non-negative integer."""
    if not isinstance(usage, dict):
        raise _fail(etype, f"{where} must be an object")
    for key in _USAGE_COUNTS:
        if key in usage:
            value = usage[key]
            if type(value) is not int or value < 0:
                raise _fail(
                    etype, f"{where}.{key} must be a non-negative integer, got {_json_type(value)}"
                )


def _seqs(etype: str, value: Any, where: str) -> None:
    if not isinstance(value, list) or not all(type(s) is int and s >= 0 for s in value):
        raise _fail(etype, f"{where} must be a list of seqs (non-negative integers)")


def _message(etype: str, data: Mapping[str, Any]) -> None:
    check_blocks(_need(etype, data, "content", list), f"{etype}: data.content")
    _check_source(etype, data)


def _chunk(etype: str, data: Mapping[str, Any]) -> None:
    _step(etype, data)
    chunk = _need(etype, data, "chunk", dict)
    if not isinstance(chunk.get("kind"), str):
        raise _fail(etype, "data.chunk.kind must be a string")


def _assistant(etype: str, data: Mapping[str, Any]) -> None:
    _step(etype, data)
    check_blocks(_need(etype, data, "content", list), f"{etype}: data.content")
    source = _need(etype, data, "source", dict)
    for key in ("provider", "model"):
        if not isinstance(source.get(key), str):
            raise _fail(etype, f"data.source.{key} must be a string")
    if "usage" in data:
        _check_usage(etype, data["usage"], "data.usage")
    if "interrupted" in data and not isinstance(data["interrupted"], bool):
        raise _fail(etype, "data.interrupted must be a boolean")


def _tool_call(etype: str, data: Mapping[str, Any]) -> None:
    _step(etype, data)
    _need(etype, data, "call_id", str)
    _need(etype, data, "name", str)
    _need(etype, data, "arguments", str)


def _tool_result(etype: str, data: Mapping[str, Any]) -> None:
    _step(etype, data)
    _need(etype, data, "call_id", str)
    content = _need(etype, data, "content", (str, list))
    if isinstance(content, list):
        check_blocks(content, f"{etype}: data.content")
    _need(etype, data, "is_error", bool)
    if "error" in data and not isinstance(data["error"], (str, dict)):
        raise _fail(etype, "data.error must be a string or an object")


def _header(etype: str, data: Mapping[str, Any]) -> None:
    _need(etype, data, "header", dict)
    reason = _need(etype, data, "reason", str)
    if reason not in HEADER_REASONS:
        raise _fail(
            etype, f"data.reason must be one of {', '.join(HEADER_REASONS)}, got {reason!r}"
        )


_DELTA_KEYS: Final = ("system", "tools", "config", "prefix")


def _header_delta(etype: str, data: Mapping[str, Any]) -> None:
    keys = [k for k in data if k in _DELTA_KEYS]
    if not keys:
        raise _fail(etype, "a delta needs at least one of system, tools, config, prefix")
    extra = [k for k in data if k not in _DELTA_KEYS]
    if extra:
        raise _fail(etype, f"unknown delta field {extra[0]!r}")


def _compact_start(etype: str, data: Mapping[str, Any]) -> None:
    _optional(etype, data, "id", str)
    _optional(etype, data, "trigger", str)
    if data.get("turn") is not None:
        _need(etype, data, "turn", int)
    _optional(etype, data, "context_tokens", int)
    if "region" in data:
        _seqs(etype, data["region"], "data.region")
        if data["region"]:
            _need(etype, data, "instruction", str)
            if _need(etype, data, "max_tokens", int) < 1:
                raise _fail(etype, "data.max_tokens must be at least 1")


def _summary(etype: str, data: Mapping[str, Any]) -> None:
    _need(etype, data, "provider", str)
    _need(etype, data, "model", str)
    _need(etype, data, "max_tokens", int)
    _optional(etype, data, "id", str)
    if "usage" in data:
        _check_usage(etype, data["usage"], "data.usage")
    shadowed = _optional(etype, data, "shadowed", dict)
    if shadowed is not None and not all(type(shadowed.get(k)) is int for k in ("start", "end")):
        raise _fail(etype, "data.shadowed needs integer start and end seqs")
    if "shadowed_seqs" in data:
        _seqs(etype, data["shadowed_seqs"], "data.shadowed_seqs")
    for key in ("shadowed_tokens", "summary_tokens"):
        _optional(etype, data, key, int)


def _compact_end(etype: str, data: Mapping[str, Any]) -> None:
    _optional(etype, data, "id", str)
    _optional(etype, data, "ok", bool)
    _optional(etype, data, "sent", bool)
    _check_error(etype, data)


def _end_seed(etype: str, data: Mapping[str, Any]) -> None:
    _optional(etype, data, "parent", str)
    _optional(etype, data, "seed_length", int)


_HEX: Final = frozenset("0123456789abcdef")


def _digest(etype: str, data: Mapping[str, Any]) -> None:
    """A checkpoint written by a store at a flush: the SHA-256 of every byte of
    the session file before this event's line (docs/format.md, "Digests")."""
    covered = _need(etype, data, "bytes", int)
    if covered < 1:
        raise _fail(etype, "data.bytes must be a positive integer (the header line comes first)")
    sha = _need(etype, data, "sha256", str)
    if len(sha) != 64 or not _HEX.issuperset(sha):
        raise _fail(etype, "data.sha256 must be 64 lowercase hexadecimal digits")
    extra = [k for k in data if k not in ("bytes", "sha256")]
    if extra:
        raise _fail(etype, f"unknown field {extra[0]!r}")


_RULES: Final[dict[str, Callable[[str, Mapping[str, Any]], None]]] = {
    "turn/start": _turn,
    "turn/end": _turn_end,
    "step/start": _step,
    "step/end": _step_end,
    "user/message": _message,
    "context/message": _message,
    "assistant/chunk": _chunk,
    "assistant/message": _assistant,
    "tool/call": _tool_call,
    "tool/result": _tool_result,
    "request/header": _header,
    "request/header-delta": _header_delta,
    "compact/start": _compact_start,
    "compact/summary": _summary,
    "compact/end": _compact_end,
    "session/end-seed": _end_seed,
    "log/digest": _digest,
}


def check_payload(etype: str, data: Mapping[str, Any]) -> None:
    """Raise :class:`EventError` unless ``data`` carries what ``etype`` requires."""
    rule = _RULES.get(etype)
    if rule is None:
        raise EventError(
            f"unknown event type {etype!r}; known types: {', '.join(sorted(EVENT_TYPES))}"
        )
    rule(etype, data)
