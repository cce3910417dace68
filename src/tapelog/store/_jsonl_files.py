"""The file-level steps of the JSONL store: whole writes with fsync, whole
reads, the never-started check, stray temporaries and the cheap summary.

Split from ``_jsonl`` so that module holds the store's contract (create, open,
load, reattach) and these the system calls it is built from.
"""

from __future__ import annotations

import builtins
import contextlib
import os
from pathlib import Path

from tapelog._errors import CorruptLogError
from tapelog.store._base import SessionSummary
from tapelog.store._format import damaged_summary, summarise_session
from tapelog.store._jsonl_summaries import last_line

__all__ = [
    "SUFFIX",
    "TAIL_BLOCK",
    "fsync_dir",
    "never_started",
    "never_started_message",
    "read_fd",
    "remove_temporaries",
    "summarise",
    "write_all",
    "write_unsynced",
]

SUFFIX = ".jsonl"
TAIL_BLOCK = 65536


def _head(path: Path) -> bytes | None:
    try:
        with path.open("rb") as f:
            return f.read(TAIL_BLOCK)
    except OSError:
        return None


def never_started(path: Path) -> bool:
    """Whether a session file holds no complete header line: an empty file (or a
    cut header) that a crash left before tapelog created files atomically."""
    head = _head(path)
    return head is not None and b"\n" not in head and len(head) < TAIL_BLOCK


def never_started_message(session_id: str, path: Path) -> str:
    what = "the file is empty" if not _head(path) else "the header line is incomplete"
    return (
        f"session {session_id} ({path}): line 1: {what}: the session was never started "
        "(a process stopped between creating its file and writing the header); "
        f"`tapelog run --session {session_id} ...` starts it afresh, replacing the file, "
        "or delete the file"
    )


def remove_temporaries(root: Path, session_id: str) -> None:
    """Remove temporary files a crash left while creating the session (under its lock)."""
    for stray in root.glob(f".{session_id}{SUFFIX}.*.tmp"):
        with contextlib.suppress(OSError):
            stray.unlink()


def write_all(fd: int, data: bytes) -> None:
    """Write every byte and fsync."""
    write_unsynced(fd, data)
    os.fsync(fd)


def write_unsynced(fd: int, data: bytes) -> None:
    """Write every byte (``os.write`` may write less)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_fd(fd: int) -> bytes:
    size = os.fstat(fd).st_size
    chunks: builtins.list[bytes] = []
    offset = 0
    while offset < size:
        chunk = os.pread(fd, size - offset, offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def summarise(path: Path) -> SessionSummary:
    """A summary from the header line and the last complete line only (cheap)."""
    session_id = path.name[: -len(SUFFIX)]
    size = 0
    details = f"run `tapelog verify {session_id}` for details"
    try:
        with path.open("rb") as f:
            size = os.fstat(f.fileno()).st_size
            first = f.readline()
            if not first.endswith(b"\n"):
                if len(first) < TAIL_BLOCK:
                    message = never_started_message(session_id, path)
                    return damaged_summary(session_id, size, message)
                raise CorruptLogError("the header line is incomplete", line=1)
            last = last_line(f, start=len(first), size=size, block=TAIL_BLOCK)
    except Exception as exc:  # one damaged file must not hide the others
        return damaged_summary(session_id, size, f"{exc}; {details}")
    return summarise_session(session_id, first, last, size, details=details)
