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
from tapelog.log._api import Session, paused_gc
from tapelog.store._base import (
    LoadedSession,
    SessionStore,
    SessionSummary,
    SessionWriter,
    count_events,
    os_error_advice,
)
from tapelog.store._format import (
    damaged_summary,
    header_line,
    replay_events,
    scan_jsonl,
    summarise_session,
)
from tapelog.store._ids import validate_session_id
from tapelog.store._jsonl_follow import JsonlFollower, held_locks
from tapelog.store._jsonl_points import JsonlPointLog
from tapelog.store._jsonl_summaries import jsonl_summaries, last_line
from tapelog.store._lock import WriteLock, make_private_dirs
from tapelog.store._reserve import Reservation
from tapelog.store._summaries import F, Folded

__all__ = ["JsonlStore", "JsonlWriter", "read_session_bytes", "read_session_file"]

_log = logging.getLogger("tapelog.store")

_SUFFIX = ".jsonl"
_TAIL_BLOCK = 65536
_FILE_MODE = 0o600


def read_session_bytes(data: bytes, *, source: str = "session file") -> tuple[LoadedSession, int]:
    """Parse and replay a session file's bytes; also return the intact byte length.

    Raises on the first problem (:class:`FormatVersionError` or
    :class:`CorruptLogError` naming the line, prefixed with ``source``); a torn
    final line is dropped with a warning. What the load built is left out of
    later garbage collections (``paused_gc(freeze=True)``): a session lives long
    and holds no cycles, so walking it again and again would be pure cost.
    """
    with paused_gc(freeze=True):
        return _read_session_bytes(data, source)


def _read_session_bytes(data: bytes, source: str) -> tuple[LoadedSession, int]:
    scan = scan_jsonl(data, max_problems=1)
    if scan.problems:
        problem = scan.problems[0]
        error = problem.error
        raise type(error)(f"{source}: {problem}", **_line_kw(error)) from error
    assert scan.info is not None
    try:
        session = replay_events(scan.info, scan.events)
    except CorruptLogError as exc:
        raise CorruptLogError(f"{source}: {exc}", line=exc.line) from exc
    warnings = tuple(f"{source}: {w}" for w in scan.warnings)
    loaded = LoadedSession(
        session=session,
        warnings=warnings,
        digest=scan.last_digest,
        undigested=scan.after_digest,
        torn=scan.good_size != len(data),
    )
    return loaded, scan.good_size


def _line_kw(error: StoreError) -> dict[str, int | None]:
    return {"line": error.line} if isinstance(error, CorruptLogError) else {}


def read_session_file(path: Path) -> LoadedSession:
    """Load a session file from any path (read-only; see :func:`read_session_bytes`)."""
    loaded, _ = read_session_bytes(Path(path).read_bytes(), source=str(path))
    return loaded


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
            (_write_all if sync else _write_unsynced)(self._fd, data)
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
        return self.root / f"{validate_session_id(session_id)}{_SUFFIX}"

    def _lock_path(self, session_id: str) -> Path:
        return self.root / ".locks" / f"{session_id}.lock"

    def exists(self, session_id: str) -> bool:
        path = self.path(session_id)
        return path.is_file() and not _never_started(path)

    def locate(self, session_id: str) -> Path:
        """The path of a stored session; :class:`SessionNotFoundError` if there is none."""
        path = self.path(session_id)
        if not path.is_file():
            raise SessionNotFoundError(
                f"no session {session_id} in the store at {self.root}; "
                "`tapelog sessions` lists the stored sessions"
            )
        if _never_started(path):
            raise SessionNotFoundError(_never_started_message(session_id, path))
        return path

    # --- writing -------------------------------------------------------------

    def reserve(self, session_id: str) -> Reservation | None:
        path = self.path(session_id)
        lock = self._lock_new(session_id)
        if path.is_file() and not _never_started(path):
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
                if not _never_started(path):
                    raise _exists(session.id, self.root)
            _remove_temporaries(self.root, session.id)
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
        temp = self.root / f".{session_id}{_SUFFIX}.{secrets.token_hex(4)}.tmp"
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
        try:
            fd = os.open(temp, flags, _FILE_MODE)
        except OSError as exc:
            raise _create_error(session_id, path, exc) from None
        try:
            try:
                _write_all(fd, data)
            except OSError as exc:
                raise _create_error(session_id, path, exc) from None
            try:
                os.link(temp, path, follow_symlinks=False)
            except FileExistsError:
                if not (path.is_file() and not path.is_symlink() and _never_started(path)):
                    raise SessionExistsError(
                        f"session {session_id} was stored at {path} by another writer while "
                        "this one was creating it (two processes created the same id at "
                        "once); open it to append, or choose another id"
                    ) from None
                os.replace(temp, path)  # an empty file an older tapelog left
            except OSError as exc:
                raise _create_error(session_id, path, exc) from None
            try:
                _fsync_dir(self.root)
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
            _remove_temporaries(self.root, session_id)
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
            data = _read_fd(fd)
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
            _summarise(path)
            for path in self.root.iterdir()
            if path.name.endswith(_SUFFIX) and not path.name.startswith(".") and path.is_file()
        ]
        summaries.sort(key=lambda s: (s.created or 0, s.id), reverse=True)
        return summaries


def _head(path: Path) -> bytes | None:
    try:
        with path.open("rb") as f:
            return f.read(_TAIL_BLOCK)
    except OSError:
        return None


def _never_started(path: Path) -> bool:
    """Whether a session file holds no complete header line: an empty file (or a
    cut header) that a crash left before tapelog created files atomically."""
    head = _head(path)
    return head is not None and b"\n" not in head and len(head) < _TAIL_BLOCK


def _never_started_message(session_id: str, path: Path) -> str:
    what = "the file is empty" if not _head(path) else "the header line is incomplete"
    return (
        f"session {session_id} ({path}): line 1: {what}: the session was never started "
        "(a process stopped between creating its file and writing the header); "
        f"`tapelog run --session {session_id} ...` starts it afresh, replacing the file, "
        "or delete the file"
    )


def _create_error(session_id: str, path: Path, exc: OSError) -> StoreError:
    return StoreError(
        f"could not create session {session_id} at {path}: {exc.strerror or exc}; "
        f"nothing was stored. {os_error_advice(exc)}, then try again"
    )


def _remove_temporaries(root: Path, session_id: str) -> None:
    """Remove temporary files a crash left while creating the session (under its lock)."""
    for stray in root.glob(f".{session_id}{_SUFFIX}.*.tmp"):
        with contextlib.suppress(OSError):
            stray.unlink()


def _exists(session_id: str, root: Path) -> SessionExistsError:
    return SessionExistsError(
        f"session {session_id} already exists in the store at {root}; "
        "open it to append, or choose another id"
    )


def _write_all(fd: int, data: bytes) -> None:
    """Write every byte and fsync."""
    _write_unsynced(fd, data)
    os.fsync(fd)


def _write_unsynced(fd: int, data: bytes) -> None:
    """Write every byte (``os.write`` may write less)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _read_fd(fd: int) -> bytes:
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


def _summarise(path: Path) -> SessionSummary:
    """A summary from the header line and the last complete line only (cheap)."""
    session_id = path.name[: -len(_SUFFIX)]
    size = 0
    details = f"run `tapelog verify {session_id}` for details"
    try:
        with path.open("rb") as f:
            size = os.fstat(f.fileno()).st_size
            first = f.readline()
            if not first.endswith(b"\n"):
                if len(first) < _TAIL_BLOCK:
                    message = _never_started_message(session_id, path)
                    return damaged_summary(session_id, size, message)
                raise CorruptLogError("the header line is incomplete", line=1)
            last = last_line(f, start=len(first), size=size, block=_TAIL_BLOCK)
    except Exception as exc:  # one damaged file must not hide the others
        return damaged_summary(session_id, size, f"{exc}; {details}")
    return summarise_session(session_id, first, last, size, details=details)
