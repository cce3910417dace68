"""Following a JSONL session file, and telling whether a writer holds it.

A session file only ever grows by whole lines (docs/format.md, "The JSONL
file"), except when a writer opening the session cuts a torn last line. So a
follower keeps the byte offset after the last complete line it handed out and
reads only what lies beyond it: a torn line is never handed out, and the line
that replaces it is. A file on another inode, or shorter than that offset, no
longer extends what was read. Growth is watched with ``stat`` (a few times a
second while a reader waits); nothing is written and no lock is taken.

"Active" means a writer holds the session's lock file (``.locks/ID.lock``). A
reader never takes that lock, even for an instant (a writer starting at that
instant would be refused): on Linux it reads the kernel's table of held
``flock`` locks (``/proc/locks``) and matches the lock file's device and
inode; elsewhere it trusts the pid a holder writes into the file if that
process exists (a holder killed with SIGKILL leaves its pid behind, so there
a reused pid can show a session as active).
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Final

from tapelog._errors import StoreError
from tapelog.store._follow import Follower

__all__ = ["JsonlFollower", "held_locks"]

_PROC_LOCKS: Final = Path("/proc/locks")
_STAT_EVERY_S: Final = 0.05


class JsonlFollower(Follower):
    """A session file from seq ``since`` on (see the module docstring)."""

    def __init__(self, session_id: str, path: Path, since: int) -> None:
        super().__init__(session_id, since)
        self._path = path
        with open(path, "rb") as f:
            self._inode = os.fstat(f.fileno()).st_ino
            data = f.read()
        offset = 0
        for _ in range(since + 1):  # the header line, then ``since`` events
            end = data.find(b"\n", offset)
            if end < 0:
                raise StoreError(
                    f"session {session_id} ({path}) has fewer than {since} stored events; "
                    f"it cannot be followed from seq {since}"
                )
            offset = end + 1
        self._offset = offset

    def _size(self) -> int | None:
        try:
            st = os.stat(self._path)
        except FileNotFoundError:
            return None
        return st.st_size if st.st_ino == self._inode else None

    def _read(self) -> list[bytes]:
        try:
            with open(self._path, "rb") as f:
                st = os.fstat(f.fileno())
                if st.st_ino != self._inode or st.st_size < self._offset:
                    raise self._gone()
                if st.st_size == self._offset:
                    return []
                f.seek(self._offset)
                data = f.read(st.st_size - self._offset)
        except FileNotFoundError:
            raise self._gone() from None
        complete = data.rfind(b"\n") + 1
        self._offset += complete
        return data[: complete - 1].split(b"\n") if complete else []

    def _release(self) -> None:
        """Nothing to release: the file is opened per read."""

    def _gone(self) -> StoreError:
        return StoreError(
            f"session {self.session_id} ({self._path}) was rewritten or cut since it was "
            "read; load it again"
        )

    def _wait(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not self._closed:
            size = self._size()
            if size is None or size > self._offset:
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(_STAT_EVERY_S, left))
        return False


def held_locks(lock_files: list[tuple[str, Path]]) -> set[str]:
    """The names of ``lock_files`` (name, path) whose ``flock`` a process holds now."""
    found: set[str] = set()
    held = _held_flocks()
    for name, path in lock_files:
        try:
            st = os.stat(path, follow_symlinks=False)
        except OSError:
            continue  # never locked (or gone meanwhile)
        if held is None:
            if _pid_alive(path):
                found.add(name)
        elif (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino) in held:
            found.add(name)
    return found


def _held_flocks() -> set[tuple[int, int, int]] | None:
    """(major, minor, inode) of every held ``flock`` write lock; ``None`` if the
    kernel does not say (not Linux, or ``/proc`` not mounted)."""
    try:
        text = _PROC_LOCKS.read_text("ascii", "replace")
    except OSError:
        return None
    held: set[tuple[int, int, int]] = set()
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 6 or fields[1] != "FLOCK" or fields[3] != "WRITE":
            continue  # a blocked waiter ("->"), a POSIX lock, a read lock
        parts = fields[5].split(":")
        with contextlib.suppress(ValueError, IndexError):
            held.add((int(parts[0], 16), int(parts[1], 16), int(parts[2])))
    return held


def _pid_alive(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            text = f.read(32).decode("ascii").strip()
        if not text.isdigit():
            return False
        os.kill(int(text), 0)
    except PermissionError:
        return True  # it exists, as another user's process
    except (OSError, UnicodeDecodeError):
        return False
    return True
