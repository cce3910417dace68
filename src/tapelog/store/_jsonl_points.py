"""The JSONL store's conversation index: ``<root>/.index/points.jsonl``.

One :class:`~tapelog.store._points.PointRecord` per line, appended under an
exclusive ``flock`` of the file (so lines of two processes never interleave,
and a line a crash cut short is ended before the next one starts); a reader
takes whole lines only, so it never reads a record that is still being
written. The file is derived from the session files (see ``_points``):
deleting it only makes the next proxy rebuild it from the newest sessions.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Sequence
from pathlib import Path

from tapelog._errors import StoreError
from tapelog.store._lock import make_private_dirs
from tapelog.store._points import PointLog, PointRecord

__all__ = ["JsonlPointLog"]

_FILE_MODE = 0o600


class JsonlPointLog(PointLog):
    """The records of a JSONL store (positions are byte offsets in the file)."""

    def __init__(self, root: Path) -> None:
        self.path = root / ".index" / "points.jsonl"

    def append(self, records: Sequence[PointRecord]) -> None:
        if not records:
            return
        data = b"".join(r.encode() + b"\n" for r in records)
        try:
            make_private_dirs(self.path.parent)
            fd = os.open(
                self.path,
                os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW,
                _FILE_MODE,
            )
        except OSError as exc:
            raise self._error("write", exc) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                data = b"\n" + data  # end a line a crash cut short; it is skipped
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        except OSError as exc:
            raise self._error("write", exc) from None
        finally:
            os.close(fd)  # releases the flock

    def read(self, position: int) -> tuple[list[PointRecord], int]:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except FileNotFoundError:
            return [], position
        except OSError as exc:
            raise self._error("read", exc) from None
        try:
            chunks: list[bytes] = []
            offset = position
            while chunk := os.pread(fd, 1 << 20, offset):
                chunks.append(chunk)
                offset += len(chunk)
        except OSError as exc:
            raise self._error("read", exc) from None
        finally:
            with contextlib.suppress(OSError):
                os.close(fd)
        data = b"".join(chunks)
        end = data.rfind(b"\n") + 1  # whole lines only: the rest is being written
        records = [
            record
            for line in data[:end].split(b"\n")
            if line and (record := PointRecord.decode(line)) is not None
        ]
        return records, position + end

    def close(self) -> None:
        """Nothing to let go: every call opens and closes the file."""

    def _error(self, action: str, exc: OSError) -> StoreError:
        return StoreError(
            f"could not {action} the conversation index {self.path}: {exc.strerror or exc}; "
            "check that the store directory is writable (and has free space); the file can "
            "be deleted, the proxy rebuilds it from the sessions"
        )
