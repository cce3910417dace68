"""The default store: one JSONL file per session under a root directory.

Layout::

    <root>/<session-id>.jsonl         header line, then one event per line
    <root>/.locks/<session-id>.lock   flock'd by the one writer (holds its pid)

The file format lives in ``_format``. Writes only ever append whole lines; the
one exception is :meth:`JsonlStore.open`, which cuts a torn final line (bytes a
crash left without their newline) before appending after it, so that the next
line does not fuse with the fragment. Loading never changes a file.

A session file comes into being whole: ``create`` writes the header (and a
fork's seed) to a temporary file in the same directory, syncs it, then links
it to its name, which fails if the name is taken. A crash leaves either no
session or a complete one, never an empty file. Files are created owner-only
(0600) and never opened for writing through a symbolic link. An empty file (or
one without a complete header line) left by an older tapelog is a session that
never started: ``exists`` is false for it, loading says so, and ``create``
replaces it.
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import logging
import os
import secrets
from collections.abc import Callable, Mapping
from pathlib import Path

from tapelog._errors import (
    CorruptLogError,
    SessionExistsError,
    SessionNotFoundError,
    StoreError,
)
from tapelog.log._api import Session
from tapelog.store._base import (
    LoadedSession,
    SessionStore,
    SessionSummary,
    SessionWriter,
    count_events,
    os_error_advice,
)
from tapelog.store._format import header_line
from tapelog.store._ids import validate_session_id
from tapelog.store._jsonl_files import (
    SUFFIX,
    fsync_dir,
    never_started,
    never_started_message,
    read_fd,
    remove_temporaries,
    summarise,
    write_all,
    write_unsynced,
)
from tapelog.store._jsonl_follow import JsonlFollower, held_locks
from tapelog.store._jsonl_points import JsonlPointLog
from tapelog.store._jsonl_read import read_session_bytes
from tapelog.store._jsonl_summaries import jsonl_summaries
from tapelog.store._lock import WriteLock, make_private_dirs
from tapelog.store._reserve import Reservation
from tapelog.store._summaries import F, Folded

__all__ = ["JsonlStore", "JsonlWriter"]

_log = logging.getLogger("tapelog.store")

_FILE_MODE = 0o600


class JsonlWriter(SessionWriter):
    """Appends a session's events to its JSONL file; holds the write lock."""

    def __init__(
        self,
        session: Session,
        *,
        path: Path,
        fd: int,
        size: int,
        lock: WriteLock,
        warnings: tuple[str, ...] = (),
        stored: bytes = b"",
    ) -> None:
        self.path = path
        self._fd = fd
        self._size = size
        self._lock = lock
        super().__init__(session, warnings=warnings, stored=stored)

    def _write(self, lines: builtins.list[bytes], *, sync: bool = True) -> None:
        data = b"\n".join(lines) + b"\n"
        try:
            (write_all if sync else write_unsynced)(self._fd, data)
        except OSError as exc:
            # Cut what a partial write left, so the file still ends on a whole line.
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, self._size)
            raise self._write_failed(
                f"could not write {count_events(len(lines))} of session {self.session_id} to "
                f"{self.path}: {exc.strerror or exc}",
                len(lines),
                os_error_advice(exc),
            ) from exc
        self._size += len(data)

    def _write_unsynced(self, lines: builtins.list[bytes]) -> None:
        self._write(lines, sync=False)

    def _sync(self) -> None:
        try:
            os.fsync(self._fd)
        except OSError as exc:
            raise StoreError(
                f"could not sync session {self.session_id} to {self.path}: "
                f"{exc.strerror or exc}; its last events are written but may not survive "
                f"a power loss. {os_error_advice(exc)}, then flush again"
            ) from None

    @property
    def size(self) -> int:
        """The session file's size as this writer wrote it."""
        return self._size

    def _release(self) -> None:
        try:
            os.close(self._fd)
        finally:
            self._lock.release()


class JsonlStore(SessionStore):
    """Sessions as ``<root>/<id>.jsonl`` files (nothing is created until needed)."""

    quick_io = True
    syncs_later = True

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self._points = JsonlPointLog(self.root)

    def __repr__(self) -> str:
        return f"JsonlStore({str(self.root)!r})"

    def path(self, session_id: str) -> Path:
        """Where the session's log is (or would be) stored."""
        return self.root / f"{validate_session_id(session_id)}{SUFFIX}"

    def _lock_path(self, session_id: str) -> Path:
        return self.root / ".locks" / f"{session_id}.lock"

    def exists(self, session_id: str) -> bool:
        path = self.path(session_id)
        return path.is_file() and not never_started(path)

    def locate(self, session_id: str) -> Path:
        """The path of a stored session; :class:`SessionNotFoundError` if there is none."""
        path = self.path(session_id)
        if not path.is_file():
            raise SessionNotFoundError(
                f"no session {session_id} in the store at {self.root}; "
                "`tapelog sessions` lists the stored sessions"
            )
        if never_started(path):
            raise SessionNotFoundError(never_started_message(session_id, path))
        return path

    # --- writing -------------------------------------------------------------

    def reserve(self, session_id: str) -> Reservation | None:
        path = self.path(session_id)
        lock = self._lock_new(session_id)
        if path.is_file() and not never_started(path):
            lock.release()
            return None
        return Reservation(session_id, self, lock, lock.release)

    def _lock_new(self, session_id: str) -> WriteLock:
        """The store directory (made owner-only, with any parent it needs) and
        the write lock of ``session_id``."""
        try:
            make_private_dirs(self.root)
        except OSError as exc:
            raise StoreError(
                f"could not create the store directory {self.root}: {exc.strerror or exc}; "
                "check the path and its permissions"
            ) from None
        return WriteLock.acquire(self._lock_path(session_id), session_id)

    def create(self, session: Session, *, reservation: Reservation | None = None) -> JsonlWriter:
        path = self.path(session.id)
        if reservation is not None:
            lock: WriteLock = reservation.take(self, session.id)
        else:
            lock = self._lock_new(session.id)
        fd = -1
        try:
            # Under the lock: a second process creating the same id at once was
            # refused by the lock, naming its holder, before getting here.
            if path.is_symlink() or path.exists():
                if not path.is_file():  # no session is there, so "it exists" would mislead
                    raise StoreError(
                        f"{path} is in the way of session {session.id}: it is not a session "
                        "file (a directory, a broken link or a special file); move it away or "
                        "choose another id"
                    )
                if not never_started(path):
                    raise _exists(session.id, self.root)
            remove_temporaries(self.root, session.id)
            data = header_line(session.info) + b"\n"
            data += b"".join(event.encode() + b"\n" for event in session.events)
            fd = self._create_whole(session.id, path, data)
        except BaseException:
            if fd >= 0:
                os.close(fd)
            lock.release()
            raise
        return JsonlWriter(session, path=path, fd=fd, size=len(data), lock=lock, stored=data)

    def _create_whole(self, session_id: str, path: Path, data: bytes) -> int:
        """Write ``data`` to a temporary file, sync it, link it to ``path``; its fd.

        Runs under the session's write lock, so an empty file at ``path`` is
        one an older tapelog left (never started) and may be replaced.
        """
        temp = self.root / f".{session_id}{SUFFIX}.{secrets.token_hex(4)}.tmp"
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
        try:
            fd = os.open(temp, flags, _FILE_MODE)
        except OSError as exc:
            raise _create_error(session_id, path, exc) from None
        try:
            try:
                write_all(fd, data)
            except OSError as exc:
                raise _create_error(session_id, path, exc) from None
            try:
                os.link(temp, path, follow_symlinks=False)
            except FileExistsError:
                if not (path.is_file() and not path.is_symlink() and never_started(path)):
                    raise SessionExistsError(
                        f"session {session_id} was stored at {path} by another writer while "
                        "this one was creating it (two processes created the same id at "
                        "once); open it to append, or choose another id"
                    ) from None
                os.replace(temp, path)  # an empty file an older tapelog left
            except OSError as exc:
                raise _create_error(session_id, path, exc) from None
            try:
                fsync_dir(self.root)
            except OSError as exc:
                raise _create_error(session_id, path, exc) from None
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                temp.unlink()
            raise
        with contextlib.suppress(OSError):
            temp.unlink()
        return fd

    def open(
        self, session_id: str, *, accept_undigested: bool = False
    ) -> tuple[Session, JsonlWriter]:
        path = self.locate(session_id)
        lock = WriteLock.acquire(self._lock_path(session_id), session_id)
        try:
            remove_temporaries(self.root, session_id)
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError as exc:
            lock.release()
            if exc.errno == errno.ELOOP:
                raise StoreError(
                    f"the file of session {session_id}, {path}, is a symbolic link; tapelog "
                    "appends only to a session file itself: put the file there instead of "
                    "the link"
                ) from None
            raise StoreError(
                f"could not open session {session_id} at {path} for appending: "
                f"{exc.strerror or exc}; check the file's permissions"
            ) from None
        except BaseException:
            lock.release()
            raise
        try:
            data = read_fd(fd)
            loaded, good_size = self._read(session_id, path, data)
            warnings, cover = loaded.resume_plan(accept_undigested=accept_undigested)
            if len(data) != good_size:
                try:
                    os.ftruncate(fd, good_size)
                    os.fsync(fd)
                except OSError as exc:
                    raise StoreError(
                        f"could not cut the incomplete last line of session {session_id} "
                        f"at {path}: {exc.strerror or exc}. {os_error_advice(exc)}, then "
                        "open the session again"
                    ) from None
                for warning in loaded.warnings:
                    _log.warning("%s", warning)
        except BaseException:
            os.close(fd)
            lock.release()
            raise
        writer = JsonlWriter(
            loaded.session,
            path=path,
            fd=fd,
            size=good_size,
            lock=lock,
            warnings=warnings,
            stored=data[:good_size],
        )
        if cover:
            # Whole events the caller accepted after the last digest: cover them
            # now, so that the log ends with a digest as every tapelog write does.
            try:
                writer.checkpoint()
            except BaseException:
                writer.close()
                raise
        return loaded.session, writer

    def reattach(self, closed: SessionWriter) -> JsonlWriter | None:
        if not isinstance(closed, JsonlWriter) or not closed.reattachable:
            return None
        session_id = closed.session_id
        lock = WriteLock.acquire(self._lock_path(session_id), session_id)
        try:
            fd = os.open(closed.path, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            lock.release()
            return None  # open() says what is wrong
        if os.fstat(fd).st_size != closed.size:  # another writer was here
            os.close(fd)
            lock.release()
            return None
        writer = JsonlWriter(closed.session, path=closed.path, fd=fd, size=closed.size, lock=lock)
        writer._carry(closed)
        return writer

    # --- reading -------------------------------------------------------------

    def load(self, session_id: str) -> LoadedSession:
        path = self.locate(session_id)
        return self.load_bytes(session_id, path.read_bytes())

    def load_bytes(self, session_id: str, data: bytes) -> LoadedSession:
        """:meth:`load`, replaying ``data``: the bytes a caller read from
        :meth:`locate`'s file (and keys a file derived from the log by)."""
        loaded, _ = self._read(session_id, self.path(session_id), data)
        return loaded

    def session_bytes(self, session_id: str) -> bytes:
        return self.locate(session_id).read_bytes()

    def _read(self, session_id: str, path: Path, data: bytes) -> tuple[LoadedSession, int]:
        loaded, good_size = read_session_bytes(data, source=f"session {session_id} ({path})")
        if loaded.session.id != session_id:
            raise CorruptLogError(
                f"session {session_id} ({path}): line 1: the header names session "
                f"{loaded.session.id!r}; a session file must be named after its id",
                line=1,
            )
        return loaded, good_size

    def follow(self, session_id: str, since: int) -> JsonlFollower:
        return JsonlFollower(session_id, self.locate(session_id), since)

    def summaries(
        self, previous: Mapping[str, Folded[F]], new_fold: Callable[[], F]
    ) -> dict[str, Folded[F]]:
        return jsonl_summaries(self.root, previous, new_fold)

    def active(self, session_id: str) -> bool:
        validate_session_id(session_id)
        return bool(held_locks([(session_id, self._lock_path(session_id))]))

    def active_sessions(self) -> set[str]:
        try:
            with os.scandir(self.root / ".locks") as scan:
                files = [(i.name[:-5], Path(i.path)) for i in scan if i.name.endswith(".lock")]
        except OSError:
            return set()  # no lock was ever taken here
        return held_locks(files)

    def point_log(self) -> JsonlPointLog:
        return self._points

    def list(self) -> builtins.list[SessionSummary]:
        if not self.root.is_dir():
            return []
        summaries = [
            summarise(path)
            for path in self.root.iterdir()
            if path.name.endswith(SUFFIX) and not path.name.startswith(".") and path.is_file()
        ]
        summaries.sort(key=lambda s: (s.created or 0, s.id), reverse=True)
        return summaries


def _create_error(session_id: str, path: Path, exc: OSError) -> StoreError:
    return StoreError(
        f"could not create session {session_id} at {path}: {exc.strerror or exc}; "
        f"nothing was stored. {os_error_advice(exc)}, then try again"
    )


def _exists(session_id: str, root: Path) -> SessionExistsError:
    return SessionExistsError(
        f"session {session_id} already exists in the store at {root}; "
        "open it to append, or choose another id"
    )
