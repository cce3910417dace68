"""Reading a JSONL session file's bytes: scan, replay, and what the load found.

Split from ``_jsonl`` (the store and its writer) because PostgreSQL's export and
``tapelog verify`` read session files too, without a store.
"""

from __future__ import annotations

from pathlib import Path

from tapelog._errors import CorruptLogError, StoreError
from tapelog.log._api import Session, paused_gc
from tapelog.store._base import LoadedSession
from tapelog.store._format import JsonlScan, replay_events, scan_jsonl
from tapelog.store._jsonl_bulk import load_jsonl_bulk

__all__ = ["read_session_bytes", "read_session_file"]


def read_session_bytes(data: bytes, *, source: str = "session file") -> tuple[LoadedSession, int]:
    """Parse and replay a session file's bytes; also return the intact byte length.

    Raises on the first problem (:class:`FormatVersionError` or
    :class:`CorruptLogError` naming the line, prefixed with ``source``); a torn
    final line is dropped with a warning. A file with no problem is read in
    bulk (:func:`load_jsonl_bulk`); any other line by line. What the load built is left out of
    later garbage collections (``paused_gc(freeze=True)``): a session lives long
    and holds no cycles, so walking it again and again would be pure cost.
    """
    with paused_gc(freeze=True):
        return _read_session_bytes(data, source)


def _read_session_bytes(data: bytes, source: str) -> tuple[LoadedSession, int]:
    fast = load_jsonl_bulk(data)
    if fast is not None:
        scan, session = fast
    else:  # something is off: line by line, which names it
        scan, session = _read_line_by_line(data, source)
    warnings = tuple(f"{source}: {w}" for w in scan.warnings)
    loaded = LoadedSession(
        session=session,
        warnings=warnings,
        digest=scan.last_digest,
        undigested=scan.after_digest,
        torn=scan.good_size != len(data),
    )
    return loaded, scan.good_size


def _read_line_by_line(data: bytes, source: str) -> tuple[JsonlScan, Session]:
    scan = scan_jsonl(data, max_problems=1)
    if scan.problems:
        problem = scan.problems[0]
        error = problem.error
        raise type(error)(f"{source}: {problem}", **_line_kw(error)) from error
    assert scan.info is not None
    try:
        session = replay_events(scan.info, scan.events, payloads=scan.payloads)
    except CorruptLogError as exc:
        raise CorruptLogError(f"{source}: {exc}", line=exc.line) from exc
    return scan, session


def _line_kw(error: StoreError) -> dict[str, int | None]:
    return {"line": error.line} if isinstance(error, CorruptLogError) else {}


def read_session_file(path: Path) -> LoadedSession:
    """Load a session file from any path (read-only; see :func:`read_session_bytes`)."""
    loaded, _ = read_session_bytes(Path(path).read_bytes(), source=str(path))
    return loaded
