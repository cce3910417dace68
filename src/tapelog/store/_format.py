"""The JSONL session file: header line, event lines, scanning and replay.

A session file is ``<header>\\n<event>\\n<event>\\n...``: the header is the
canonical JSON of ``{"format_version", "id", "created"[, "cwd", "parent",
"seed_length"]}`` and each event line is exactly ``Event.encode()``. Every line
is written whole, newline included, in one append, so a line without its
newline can only be the torn tail of a write a crash interrupted; any other
damage is corruption and is reported with its 1-based line number.

Scanning is split from replay so ``tapelog verify`` can list every line-level
problem in a file, while ``load`` stops at the first. Both hold every line to
the same rules: valid JSON, a known envelope, and tapelog's canonical bytes
(whitespace between tokens aside), so a duplicated key or an edited escape is
refused by ``load`` exactly as by ``verify``. Both check every ``log/digest``
against the bytes before its line.
"""

from __future__ import annotations

import hashlib
import json
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
from tapelog.log import decode, encode
from tapelog.log._api import (
    SESSION_FORMAT_VERSION,
    Event,
    RuleBreaks,
    Session,
    SessionInfo,
    decode_raw,
    encode_trusted,
    event_from_json,
    event_from_line,
    item_from_line,
    replay_scan,
)
from tapelog.store._base import Digest, SessionSummary
from tapelog.store._ids import validate_session_id

__all__ = [
    "DigestChain",
    "JsonlScan",
    "Problem",
    "header_line",
    "info_from_header",
    "replay_events",
    "scan_jsonl",
    "torn_warning",
]

_NOT_JSON: Final = object()  # what a line that is not JSON decodes to in the hot loop
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
    events: list[Event | bytes] = field(default_factory=list)
    """Each event, or for a packed one at its seq's position its record (bytes:
    no object per event), whose decoded payload is at the same position of
    ``payloads`` (``None`` beside an event)."""
    payloads: list[Any] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    lines: int = 0
    good_size: int = 0
    spaced: list[int] = field(default_factory=list)
    """Lines (1-based) that differ from canonical form only by whitespace
    between JSON tokens (e.g. written with ``json.dumps``'s default separators)."""
    last_digest: Digest | None = None
    """The last ``log/digest`` of the session's own (not a fork's seed) that matched."""
    last_digest_line: int | None = None
    """The line of the session's last own ``log/digest``, matched or not."""
    after_digest: int = 0
    """Complete event lines no digest of the session's own covers: those after
    ``last_digest_line``, or, when it has none, every event after the seed (and
    after the ``session/end-seed`` a fork's ``create`` stores with it)."""


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


def torn_warning(line: int, size: int, events: int) -> str:
    return (
        f"line {line}: dropped an incomplete final line ({size} bytes, no newline) left by a "
        f"process that stopped while writing it; the {events} complete events before it are intact"
    )


def scan_jsonl(
    data: bytes, *, max_problems: int | None = None, check_canonical: bool = True
) -> JsonlScan:
    """Parse a session file's bytes line by line, collecting problems.

    Stops after ``max_problems`` problems (``load`` passes 1). A line that
    parses but is not byte-identical to the canonical encoding of its event
    (a duplicated key, an escape tapelog does not write, an edit) is a problem,
    whitespace between tokens aside (listed in ``spaced``): the log's bytes are
    part of what an auditor checks, and a loader must not read a line the
    verifier refuses. ``check_canonical`` is kept for callers of older
    versions; the check is always made. Every ``log/digest`` after a fork's
    seed is checked against the bytes before its line.
    """
    del check_canonical
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
        if header_line(scan.info) != lines[0]:
            if _without_spaces(lines[0]) != header_line(scan.info):
                raise CorruptLogError("the header line is not in canonical form", line=1)
            scan.spaced.append(1)
    except JsonValueError as exc:
        if problem(1, None, CorruptLogError(str(exc), line=1)):
            return scan
    except StoreError as exc:
        if problem(1, None, exc):
            return scan
    seed = scan.info.seed_length or 0 if scan.info is not None else 0
    digests = DigestChain(data, seed)
    offset = len(lines[0]) + 1  # where line 2 starts
    prefix_ok = not scan.problems
    events, payloads, spaced = scan.events, scan.payloads, scan.spaced
    # The hot loop of every load: one decode, one re-encode to prove the line
    # canonical, one envelope check (`item_from_line`) per line, inlined; a
    # packed event becomes its record, no object. Anything off that path takes
    # `_parse_line_checked`, which says why.
    for number, raw in enumerate(lines[1:], 2):
        try:
            obj = decode_raw(raw)
        except ValueError:
            obj = _NOT_JSON
        item: Event | bytes | None = None
        if obj is not _NOT_JSON and encode_trusted(obj) == raw:
            item = item_from_line(obj, raw)
            if type(item) is bytes and obj["seq"] != number - 2:
                item = event_from_line(obj, raw)  # off its position: replay names the seq
        if item is None:
            try:
                item, obj = _parse_line_checked(raw, number, spaced)
            except CorruptLogError as exc:
                offset += len(raw) + 1
                prefix_ok = False
                if problem(number, number - 2, exc):  # line n holds seq n - 2
                    return scan
                continue
        if prefix_ok:
            events.append(item)
            payloads.append(obj["data"] if type(item) is bytes else None)
        digests.after += 1
        if obj["type"] == "log/digest":
            error = digests.check(obj["seq"], obj["data"], number, offset)
            if error is not None and problem(number, number - 2, error):
                return scan
        offset += len(raw) + 1
    digests.finish(scan, len(lines))
    if torn:
        scan.warnings.append(torn_warning(len(lines) + 1, len(torn), len(lines) - 1))
    return scan


class DigestChain:
    """Checks each ``log/digest`` against the SHA-256 of the bytes before its line,
    hashing the file once, front to back. After the first mismatch the rest of
    the chain cannot be judged (every later digest covers the change too)."""

    def __init__(self, data: bytes, seed: int) -> None:
        self._view = memoryview(data)
        self._seed = seed
        self._hasher = hashlib.sha256()
        self._hashed = 0
        self._broken = False
        self.last: Digest | None = None  # the last one that matched
        self.last_line: int | None = None  # the line of the last one, matched or not
        self.after = 0  # complete event lines since the last digest

    def check(
        self, seq: int, data: Mapping[str, Any], line: int, start: int
    ) -> CorruptLogError | None:
        """Check the digest with payload ``data`` on line ``line`` (at byte ``start``)."""
        if seq < self._seed:  # a fork's seed: digests of the parent's bytes
            return None
        self.last_line, self.after = line, 0
        if self._broken:
            return None
        covered, sha = data.get("bytes"), data.get("sha256")
        if type(covered) is not int or type(sha) is not str:
            return None  # a bad payload: replay names it
        if covered != start:
            self._broken = True
            return CorruptLogError(
                f"line {line}: the digest covers the first {covered} bytes of the file, but "
                f"{start} bytes come before its line: lines were removed or added "
                f"{self._since()}",
                line=line,
            )
        self._hasher.update(self._view[self._hashed : start])
        self._hashed = start
        if self._hasher.hexdigest() != sha:
            self._broken = True
            return CorruptLogError(
                f"line {line}: the digest does not match the first {start} bytes of the "
                "file: they were changed after the digest was written (a line edited, "
                f"removed, added or reordered), {self._since()}",
                line=line,
            )
        self.last = Digest(line=line, seq=seq, bytes=covered, sha256=sha)
        return None

    def finish(self, scan: JsonlScan, lines: int) -> None:
        """Set what ``scan`` says of the digests, once every one of the file's
        ``lines`` complete lines (the header too) went past the chain."""
        scan.last_digest = self.last
        scan.last_digest_line = self.last_line
        if self.last_line is not None:
            scan.after_digest = self.after
        else:  # no digest of its own: every own event but what ``create`` stored with the seed
            own = lines - 1 - (self._seed + 1 if self._seed else 0)
            scan.after_digest = max(0, own)

    def _since(self) -> str:
        if self.last is not None:
            return f"after line {self.last.line} (the last digest that matches)"
        return "anywhere before it (no earlier digest of the session matches)"


def _parse_line_checked(raw: bytes, number: int, spaced: list[int]) -> tuple[Event, Any]:
    """The event of a line off the fast path of :func:`scan_jsonl`: spaced,
    not canonical, or not valid (then it says why, naming the line)."""
    where = f"line {number}"
    try:
        obj = decode(raw, path=where)
        canonical = encode_trusted(obj)
        if canonical != raw:
            if _without_spaces(raw) != canonical:
                raise CorruptLogError(_not_canonical(raw, where), line=number)
            spaced.append(number)
        event = event_from_json(obj, where=where, decoded=True, line=canonical, canonical=True)
    except (JsonValueError, LogError) as exc:
        text = str(exc)
        message = text if text.startswith(f"{where}:") else f"{where}: {text}"
        raise CorruptLogError(message, line=number) from exc
    return event, obj


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _not_canonical(raw: bytes, where: str) -> str:
    """Why a line that parses is refused (the slow path: such lines are rare)."""
    try:
        json.loads(raw, object_pairs_hook=_refuse_duplicates)
    except _DuplicateKey as dup:
        return (
            f"{where}: the key {dup.key!r} appears twice in one object; tapelog never "
            "writes a duplicated key, so the line was edited or written by another program "
            "(a reader would see only one of the two values)"
        )
    except ValueError:
        pass
    return (
        f"{where}: the line is not in canonical form (it was not written by "
        "tapelog's encoder, or it was edited)"
    )


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


def replay_events(
    info: SessionInfo,
    events: Sequence[Event | bytes],
    *,
    payloads: Sequence[Any] = (),
    rule_breaks: RuleBreaks | None = None,
) -> Session:
    """Replay scanned events (lines 2, 3, ...) into a Session, naming the bad line.

    ``Session.from_info`` validates contiguity, payloads, surface ops, the
    header fold and the structural rules (:class:`tapelog.log._rules.LogRules`)
    exactly as live appends; this only adds where it happened. ``rule_breaks``
    (for ``verify``) is told of each structural break instead. ``events`` and
    ``payloads`` are a scan's (:class:`JsonlScan`: records of packed events).
    """
    reached = -1

    def feed() -> Iterator[Event | bytes]:
        nonlocal reached
        for i, event in enumerate(events):
            reached = i
            yield event

    try:
        return replay_scan(Session.from_info(info, ()), feed(), payloads, rule_breaks)
    except (LogError, JsonValueError) as exc:
        line = reached + 2
        raise CorruptLogError(f"line {line}: {exc}", line=line) from exc
