"""The one-writer-per-session lock: ``flock`` on a small lock file.

``fcntl.flock`` locks belong to an open file description, so a second writer
is refused whether it lives in another process or in this one, and the kernel
releases the lock when the holder exits, even on SIGKILL: there is no stale
lock to clean up. The holder writes its pid into the file so the refusal can
say who holds the session. Lock files are never deleted (deleting one while
another process is about to lock it would let two writers in).

Lock files are created owner-only (0600, in a 0700 ``.locks`` directory) and
opened without following a symbolic link: a link planted where a lock file
goes is refused, never followed (truncating the pid would truncate its target).
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from pathlib import Path

from tapelog._errors import SessionLockedError, StoreError

__all__ = ["WriteLock", "make_private_dirs"]


def make_private_dirs(path: Path) -> None:
    """Create ``path`` and every missing parent owner-only (0700).

    ``Path.mkdir(parents=True)`` gives the parents the umask's mode (0755 under
    umask 022), and the default store's parents (``~/.local/share/tapelog``)
    would be readable by every user. Directories that exist are left as they are.
    """
    missing: list[Path] = []
    while not path.is_dir():
        missing.append(path)
        if path.parent == path:
            break
        path = path.parent
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=0o700)
        except FileExistsError:  # made meanwhile by another process: its mode is its own
            if not directory.is_dir():
                raise
            continue
        os.chmod(directory, 0o700)  # only narrows: mkdir's mode was cut by the umask


class WriteLock:
    """An exclusive, non-blocking lock held until :meth:`release`."""

    __slots__ = ("_fd", "path")

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, path: Path, session_id: str) -> WriteLock:
        """Take the lock or raise :class:`SessionLockedError` naming the holder."""
        try:
            make_private_dirs(path.parent)
            fd = os.open(
                path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK, 0o600
            )
        except OSError as exc:
            raise _lock_error(path, session_id, exc) from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise StoreError(
                    f"the lock file of session {session_id}, {path}, is not a regular file; "
                    "move it away (tapelog creates it again) and try again"
                )
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            raise SessionLockedError(_locked_message(session_id, holder)) from None
        except BaseException:
            os.close(fd)
            raise
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError as exc:
            os.close(fd)
            raise _lock_error(path, session_id, exc) from None
        return cls(path, fd)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Release the lock (idempotent). The file stays; see the module docstring."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.ftruncate(fd, 0)
        finally:
            os.close(fd)


def _lock_error(path: Path, session_id: str, exc: OSError) -> StoreError:
    if exc.errno == errno.ELOOP:
        return StoreError(
            f"the lock file of session {session_id}, {path}, is a symbolic link; tapelog "
            "never follows one there (it would overwrite the link's target): remove the "
            "link and try again"
        )
    reason = exc.strerror or str(exc)
    return StoreError(
        f"could not take the write lock of session {session_id} at {path}: {reason}; "
        "check that the store directory is writable (and has free space), then try again"
    )


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None


def _locked_message(session_id: str, pid: int | None) -> str:
    if pid == os.getpid():
        return (
            f"session {session_id} is open for writing by another writer in this process "
            f"(pid {pid}); close that writer before opening the session again"
        )
    holder = "another process" if pid is None else f"another process (pid {pid})"
    return (
        f"session {session_id} is open for writing by {holder}; "
        "wait for it to finish or stop it, then try again"
    )
