"""The JSONL session file: header line, event lines, scanning and replay.

A session file is ``<header>\\n<event>\\n<event>\\n...``: the header is the
canonical JSON of ``{"format_version", "id", "created"[, "cwd", "parent",
"seed_length"]}`` and each event line is exactly ``Event.encode()``. Every line
is written whole, newline included, in one append, so a line without its
newline can only be the torn tail of a write a crash interrupted; any other
damage is corruption and is reported with its 1-based line number.

Scanning is split from replay so ``tapelog verify`` can list every line-level
problem in a file, while ``load`` stops at the first.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from tapelog._errors import (
    CorruptLogError,
    FormatVersionError,
    InvalidSessionIdError,
    JsonValueError,
    LogError,
    StoreError,
)
from tapelog.log import (
    SESSION_FORMAT_VERSION,
    Event,
    Session,
    SessionInfo,
    decode,
    encode,
    event_from_json,
)
from tapelog.store._base import SessionSummary
from tapelog.store._ids import validate_session_id

__all__ = [
    "JsonlScan",
    "Problem",
    "header_line",
    "info_from_header",
    "replay_events",
    "scan_jsonl",
]

_HEADER_KEYS: Final = ("format_version", "id", "created", "cwd", "parent", "seed_length")


def header_line(info: SessionInfo) -> bytes:
    """The canonical header line of a session (without its newline)."""
    out: dict[str, Any] = {
        "format_version": SESSION_FORMAT_VERSION,
        "id": info.id,
        "created": info.created,
    }
    for key in ("cwd", "parent", "seed_length"):
        value = getattr(info, key)
        if value is not None:
            out[key] = value
    return encode(out)


def info_from_header(obj: Any) -> SessionInfo:
    """Parse a header object; :class:`FormatVersionError` or :class:`CorruptLogError`."""
    if not isinstance(obj, Mapping):
        raise CorruptLogError("the header must be a JSON object", line=1)
    version = obj.get("format_version")
    if "format_version" not in obj:  # not a tapelog header at all, not a future one
        raise CorruptLogError(
            "the header has no format_version; this is not a tapelog session log "
            "(its first line must be the header tapelog writes)",
            line=1,
        )
    if version != SESSION_FORMAT_VERSION or type(version) is not int:
        raise FormatVersionError(
            f"the session is stored in format version {version!r}, but this version of "
            f"tapelog reads format version {SESSION_FORMAT_VERSION} only; open it with the "
            "tapelog version that wrote it"
        )
    unknown = [k for k in obj if k not in _HEADER_KEYS]
    if unknown:
        raise CorruptLogError(f"the header has an unknown field {unknown[0]!r}", line=1)

    def field_of(key: str, kind: type, required: bool = False) -> Any:
        value = obj.get(key)
        if value is None and not required:
            return None
        if type(value) is not kind:
            need = "an integer" if kind is int else "a string"
            raise CorruptLogError(f"the header field {key!r} must be {need}", line=1)
        return value

    session_id = field_of("id", str, required=True)
    try:
        validate_session_id(session_id)
    except InvalidSessionIdError as exc:
        raise CorruptLogError(f"the header names an {exc}", line=1) from None
    return SessionInfo(
        id=session_id,
        created=field_of("created", int, required=True),
        cwd=field_of("cwd", str),
        parent=field_of("parent", str),
        seed_length=field_of("seed_length", int),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Problem:
    """One thing wrong with a stored log, located by line (and seq when known)."""

    line: int
    seq: int | None
    error: StoreError

    @property
    def message(self) -> str:
        """The error text without the location prefixes ``__str__`` adds back."""
        text = str(self.error)
        for prefix in (f"line {self.line}: ", f"seq {self.seq}: "):
            if text.startswith(prefix):
                text = text[len(prefix) :]
        return text

    def __str__(self) -> str:
        where = f"line {self.line}" if self.seq is None else f"line {self.line} (seq {self.seq})"
        return f"{where}: {self.message}"


@dataclass(slots=True, kw_only=True)
class JsonlScan:
    """What a scan of a session file found.

    ``events`` are the well-formed events before the first problem (the prefix
    that can be replayed); ``good_size`` is the byte length up to the end of
    the last complete line, where an appending writer continues.
    """

    info: SessionInfo | None = None
    events: list[Event] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    lines: int = 0
    good_size: int = 0
    spaced: list[int] = field(default_factory=list)
    """Lines (1-based) that differ from canonical form only by whitespace
    between JSON tokens (e.g. written with ``json.dumps``'s default separators)."""


def summarise_session(
    session_id: str, header: bytes, last: bytes | None, size: int, *, details: str
) -> SessionSummary:
    """What ``list()`` shows of a session, from its header line and last event line
    only (no replay). A damaged session becomes a summary with ``error`` set,
    ending with ``details`` (where to look), so it cannot hide the others."""
    try:
        info = info_from_header(decode(header, path="header"))
        events, last_time = 0, None
        if last is not None:
            obj = decode(last, path="last event")
            seq, time = obj.get("seq"), obj.get("time")
            if type(seq) is not int or type(time) is not int:
                raise CorruptLogError("the last event has no integer seq and time")
            events, last_time = seq + 1, time
    except Exception as exc:
        return damaged_summary(session_id, size, f"{exc}; {details}")
    return SessionSummary(
        id=session_id,
        created=info.created,
        parent=info.parent,
        events=events,
        last_time=last_time,
        size=size,
    )


def damaged_summary(session_id: str, size: int, error: str) -> SessionSummary:
    """The summary of a session that could not be read (``error`` says why)."""
    return SessionSummary(
        id=session_id,
        created=None,
        parent=None,
        events=None,
        last_time=None,
        size=size,
        error=error,
    )


def _torn_warning(line: int, size: int, events: int) -> str:
    return (
        f"line {line}: dropped an incomplete final line ({size} bytes, no newline) left by a "
        f"process that stopped while writing it; the {events} complete events before it are intact"
    )


def scan_jsonl(
    data: bytes, *, max_problems: int | None = None, check_canonical: bool = False
) -> JsonlScan:
    """Parse a session file's bytes line by line, collecting problems.

    Stops after ``max_problems`` problems (``load`` passes 1). With
    ``check_canonical`` a line that parses but is not byte-identical to the
    canonical encoding of its event (hand-edited, or written by another
    encoder) is a problem too: the log's bytes are part of what an auditor
    checks.
    """
    scan = JsonlScan()
    lines = data.split(b"\n")
    torn = lines.pop()  # b"" when the file ends with a newline
    scan.lines = len(lines)
    scan.good_size = len(data) - len(torn)

    def problem(line: int, seq: int | None, error: StoreError) -> bool:
        scan.problems.append(Problem(line=line, seq=seq, error=error))
        return max_problems is not None and len(scan.problems) >= max_problems

    if not lines:
        what = "the header line is incomplete" if torn else "the file is empty"
        message = f"{what}; a session log starts with a header line"
        problem(1, None, CorruptLogError(message, line=1))
        return scan
    try:
        header = decode(lines[0], path="header")
        scan.info = info_from_header(header)
        if check_canonical and header_line(scan.info) != lines[0]:
            if _without_spaces(lines[0]) != header_line(scan.info):
                raise CorruptLogError("the header line is not in canonical form", line=1)
            scan.spaced.append(1)
    except JsonValueError as exc:
        if problem(1, None, CorruptLogError(str(exc), line=1)):
            return scan
    except StoreError as exc:
        if problem(1, None, exc):
            return scan
    prefix_ok = not scan.problems
    for index, raw in enumerate(lines[1:]):
        number = index + 2
        try:
            event = _parse_line(raw, number, check_canonical)
            if check_canonical and event.encode() != raw:
                scan.spaced.append(number)
        except CorruptLogError as exc:
            prefix_ok = False
            if problem(number, number - 2, exc):  # line n holds seq n - 2
                return scan
            continue
        if prefix_ok:
            scan.events.append(event)
    if torn:
        scan.warnings.append(_torn_warning(len(lines) + 1, len(torn), len(lines) - 1))
    return scan


def _parse_line(raw: bytes, number: int, check_canonical: bool) -> Event:
    where = f"line {number}"
    try:
        event = event_from_json(decode(raw, path=where), where=where, decoded=True, line=raw)
    except (JsonValueError, LogError) as exc:
        text = str(exc)
        message = text if text.startswith(f"{where}:") else f"{where}: {text}"
        raise CorruptLogError(message, line=number) from exc
    if check_canonical and event.encode() != raw and event.encode() != _without_spaces(raw):
        raise CorruptLogError(
            f"{where}: the line is not in canonical form (it was not written by tapelog's "
            "encoder, or it was edited)",
            line=number,
        )
    return event


def _without_spaces(raw: bytes) -> bytes:
    """``raw`` with the whitespace between JSON tokens removed (strings untouched)."""
    out = bytearray()
    i, n = 0, len(raw)
    while i < n:
        q = raw.find(b'"', i)
        end = n if q < 0 else q
        out += raw[i:end].translate(None, b" \t\r")
        if q < 0:
            break
        j = q + 1
        while True:  # find the closing quote, skipping escaped ones
            j = raw.find(b'"', j)
            if j < 0:
                return bytes(out) + raw[q:]
            backslashes = 0
            while raw[j - 1 - backslashes] == 0x5C:
                backslashes += 1
            if backslashes % 2 == 0:
                break
            j += 1
        out += raw[q : j + 1]
        i = j + 1
    return bytes(out)


def replay_events(info: SessionInfo, events: Sequence[Event]) -> Session:
    """Replay scanned events (lines 2, 3, ...) into a Session, naming the bad line.

    ``Session.from_info`` validates contiguity, payloads, surface ops and the
    header fold exactly as live appends; this only adds where it happened.
    """
    reached = -1

    def feed() -> Iterator[Event]:
        nonlocal reached
        for i, event in enumerate(events):
            reached = i
            yield event

    try:
        return Session.from_info(info, feed())
    except (LogError, JsonValueError) as exc:
        line = reached + 2
        raise CorruptLogError(f"line {line}: {exc}", line=line) from exc
