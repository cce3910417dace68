"""The server's view of a JSONL store: files, byte offsets and flock'd lock files.

A session file only ever grows by whole lines (docs/format.md, "The JSONL
file"), except when a writer opening the session cuts a torn last line. So:

* an index entry stays valid while the file's (inode, size, mtime) is the
  same; a file that grew on the same inode, and still has the same 64 bytes
  before the folded offset, is folded from that offset on; anything else
  (a new inode, a file no longer than what was folded, other bytes before
  that offset) is folded again from the start. An edit further back in a
  file that also grew is not seen by the fold (it reads only the new bytes);
  the index's audit loads the whole log and checks its digests, which catch
  it, and the row is then marked damaged;
* following a session reads from the offset after its last complete line, so
  a torn line is never read and the line that replaces it is.

"Running" means a writer holds the session's lock file (``.locks/ID.lock``).
The server never takes that lock, even for an instant (a writer starting at
that instant would be refused): on Linux it reads the kernel's table of held
``flock`` locks (``/proc/locks``) and matches the lock file's device and
inode; elsewhere it trusts the pid a holder writes into the file if that
process exists (a holder killed with SIGKILL leaves its pid behind, so there
a reused pid can show a session as running).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import BinaryIO

from tapelog._errors import CorruptLogError, InvalidSessionIdError
from tapelog.serve._source import Entry, Followed, Source
from tapelog.serve._summary import Summary
from tapelog.store import JsonlStore
from tapelog.store._api import read_session_bytes, validate_session_id

__all__ = ["JsonlSource", "held_flocks"]

_SUFFIX = ".jsonl"
_TAIL = 64
_LOCKS = Path("/proc/locks")


def held_flocks() -> set[tuple[int, int, int]] | None:
    """(major, minor, inode) of every held ``flock`` write lock; ``None`` if the
    kernel does not say (not Linux, or ``/proc`` not mounted)."""
    try:
        text = _LOCKS.read_text("ascii", "replace")
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


def _pid_alive(path: str) -> bool:
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


def _session_id(name: str) -> str | None:
    try:
        return validate_session_id(name)
    except InvalidSessionIdError:
        return None


class JsonlSource(Source):
    """A directory of session files (see the module docstring)."""

    def __init__(self, store: JsonlStore) -> None:
        self.store = self._files = store
        self.label = str(store.root)

    # --- the index -------------------------------------------------------------

    def refresh(self, entries: Mapping[str, Entry]) -> dict[str, Entry]:
        out: dict[str, Entry] = {}
        try:
            scan = os.scandir(self._files.root)
        except OSError:
            return out  # no store yet: no sessions
        with scan:
            for item in scan:
                name = item.name
                if not name.endswith(_SUFFIX) or name.startswith("."):
                    continue
                session_id = _session_id(name[: -len(_SUFFIX)])
                try:
                    if session_id is None or not item.is_file():
                        continue
                    st = item.stat()
                except OSError:
                    continue  # removed meanwhile
                key = [st.st_ino, st.st_size, st.st_mtime_ns]
                old = entries.get(session_id)
                if old is not None and old.key == key:
                    out[session_id] = old
                else:
                    out[session_id] = self._fold(session_id, item.path, key, old)
        return out

    def _fold(self, session_id: str, path: str, key: list[int], old: Entry | None) -> Entry:
        """Fold the file (from ``old``'s offset when it still extends what was folded)."""
        try:
            with open(path, "rb") as f:
                if old is not None and self._extends(f, old, key):
                    summary, base = old.summary.copy(), old.offset
                    data = f.read()
                else:
                    summary, base = Summary(id=session_id), 0
                    data = f.read()
                    end = data.find(b"\n")
                    if end < 0:
                        summary.error = "line 1: the header line is incomplete (never started)"
                        return Entry(summary=summary, key=key, offset=0)
                    summary.header(data[:end])
                    base, data = end + 1, data[end + 1 :]
        except OSError as exc:
            summary = Summary(id=session_id, error=f"cannot read the file: {exc.strerror or exc}")
            return Entry(summary=summary, key=key, offset=0)
        complete = data.rfind(b"\n") + 1
        if summary.error is None and complete:
            summary.lines(data[: complete - 1].split(b"\n"))
        offset = base + complete
        tail = data[max(complete - _TAIL, 0) : complete]
        if len(tail) < _TAIL and old is not None and base == old.offset:
            tail = (bytes.fromhex(old.tail) + tail)[-_TAIL:]
        return Entry(summary=summary, key=key, offset=offset, tail=tail.hex())

    @staticmethod
    def _extends(f: BinaryIO, old: Entry, key: list[int]) -> bool:
        """Whether the open file still holds, before ``old.offset``, the bytes folded."""
        tail = bytes.fromhex(old.tail)
        if old.summary.error is not None or old.offset == 0 or not tail:
            return False
        if key[0] != old.key[0] or key[1] <= old.offset:
            return False  # another file, or one rewritten without growing: fold it again
        f.seek(old.offset - len(tail))
        if f.read(len(tail)) != tail:
            f.seek(0)
            return False
        return True

    # --- writers ---------------------------------------------------------------

    def running(self, ids: Iterable[str] | None = None) -> set[str]:
        locks = self._files.root / ".locks"
        held = held_flocks()
        found: set[str] = set()
        try:
            device = os.stat(locks).st_dev
            if ids is None:  # every lock file; a directory entry knows its inode
                with os.scandir(locks) as scan:
                    files = [
                        (i.name[:-5], i.path, i.inode()) for i in scan if i.name.endswith(".lock")
                    ]
            else:
                paths = [(i, str(locks / f"{i}.lock")) for i in ids]
                files = [
                    (i, p, os.stat(p, follow_symlinks=False).st_ino)
                    for i, p in paths
                    if os.path.lexists(p)
                ]
        except OSError:
            return found  # no lock was ever taken here (or one vanished: ask again later)
        dev = (os.major(device), os.minor(device))
        for session_id, path, inode in files:
            if ((*dev, inode) in held) if held is not None else _pid_alive(path):
                found.add(session_id)
        return found

    def close(self) -> None:
        """Nothing to release: files are opened per read."""

    # --- following one session -------------------------------------------------

    def follow(self, session_id: str) -> Followed:
        path = self._files.locate(session_id)  # not found / never started: one sentence
        with open(path, "rb") as f:
            inode = os.fstat(f.fileno()).st_ino
            data = f.read()
        loaded, good = read_session_bytes(data, source=f"session {session_id} ({path})")
        if loaded.session.id != session_id:
            raise CorruptLogError(
                f"session {session_id} ({path}): line 1: the header names session "
                f"{loaded.session.id!r}; a session file must be named after its id",
                line=1,
            )
        return Followed.of(loaded.session, data[:good], good, inode=inode, warnings=loaded.warnings)

    def read_new(self, session_id: str, followed: Followed) -> list[bytes] | None:
        path = self._files.path(session_id)
        try:
            with open(path, "rb") as f:
                st = os.fstat(f.fileno())
                if st.st_ino != followed.inode or st.st_size < followed.position:
                    return None
                if st.st_size == followed.position:
                    return []
                f.seek(followed.position)
                data = f.read(st.st_size - followed.position)
        except FileNotFoundError:
            return None
        complete = data.rfind(b"\n") + 1
        followed.position += complete
        return data[: complete - 1].split(b"\n") if complete else []
