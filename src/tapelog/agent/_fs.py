"""The built-in ``fs`` toolset: read, list and write files inside one workspace.

The model is untrusted input: every path it names is walked here one
component at a time, each opened relative to the directory before it
(``openat`` with ``O_NOFOLLOW``), from a descriptor of the workspace root
opened for the call. What is checked is the very object that is then read,
listed or written, so swapping a directory for a symlink mid-call cannot
lead outside. A symlink met on the way is expanded by hand and followed only
while it stays inside (a relative target, or an absolute one naming the
workspace); ``..`` goes back to a directory already walked and never above
the root. Only regular files are opened for reading or writing (without
blocking: a FIFO is refused at once, not waited on). A file with more than one
hard link is never written, and read only when no protected place shares its
file system (a hard link's other names are on the same one).

Some places are protected (docs/security.md, "Workspace and tools"): nothing
inside version-control metadata (``.git``, ``.hg``, ... by name, any case,
and any directory that is a git directory by content) is ever written, nor is
a git directory assembled (``_fs_git``); the session store, tapelog's own data
and the user's login files are neither read, listed nor written. Limits bound
what one call writes or returns.

Results and errors name paths exactly as the model gave them: host paths
would leak into the log and make the same session produce different bytes
on another machine. This is Linux/POSIX code (``dir_fd`` support).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections import deque
from pathlib import Path
from typing import Final, Literal

from tapelog._errors import ToolError
from tapelog.agent._fs_git import creating, refuse_git_dir
from tapelog.agent._fs_rules import (
    Id,
    Rules,
    display_name,
    is_dir_entry,
    norm,
    not_regular,
    os_error,
    protected_error,
    show,
)

__all__ = [
    "DEFAULT_MAX_LIST_ENTRIES",
    "DEFAULT_MAX_READ_BYTES",
    "DEFAULT_MAX_WRITE_BYTES",
    "Workspace",
]

DEFAULT_MAX_READ_BYTES: Final = 256 * 1024
"""read_file refuses larger files: one file should not fill the context window."""

DEFAULT_MAX_WRITE_BYTES: Final = 1024 * 1024
"""write_file refuses larger content (UTF-8 bytes); nothing is written."""

DEFAULT_MAX_LIST_ENTRIES: Final = 1000
"""list_dir shows the first entries in sorted order and says how many more there are."""

_Mode = Literal["read", "list", "write"]

_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_READ_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_REWRITE_FLAGS: Final = os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
"""An existing file: if it vanished since it was checked, the walk looks again."""
_CREATE_FLAGS: Final = _REWRITE_FLAGS | os.O_CREAT
_NEW_FILE_MODE: Final = 0o644
_MAX_LINKS: Final = 40
"""Symlinks expanded in one path (the kernel's limit); more is a loop."""
_MAX_DEPTH: Final = 256
"""Directories one path may descend (each holds a descriptor while walked)."""
_MAX_STEPS: Final = 4096
"""Components one path may walk, symlink expansions and retries included."""


class Workspace:
    def __init__(
        self,
        given: str,
        root: Path,
        *,
        rules: Rules,
        protected_names: frozenset[str],
        read_only: str | None,
        max_read_bytes: int,
        max_write_bytes: int,
        max_list_entries: int,
    ) -> None:
        self.root = root
        st = os.stat(root)
        self.root_id: Id = (st.st_dev, st.st_ino)
        self.rules = rules
        self.protected_names = protected_names
        self.read_only = read_only
        self.max_read_bytes = max_read_bytes
        self.max_write_bytes = max_write_bytes
        self.max_list_entries = max_list_entries
        # An absolute symlink target naming the workspace is followed inside it.
        self.prefixes = sorted({str(root), os.path.abspath(given)}, key=len, reverse=True)

    # --- the tools -----------------------------------------------------------

    def read(self, path: str) -> str:
        fd = self._open(path, "read")
        try:
            chunks: list[bytes] = []
            size = 0
            while size <= self.max_read_bytes:
                chunk = os.read(fd, self.max_read_bytes + 1 - size)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
            if size > self.max_read_bytes:
                total = os.fstat(fd).st_size
                raise ToolError(
                    f"file {show(path)} is {total} bytes, over the read limit of "
                    f"{self.max_read_bytes} bytes"
                )
        except OSError as exc:
            raise os_error("read", path, exc) from None
        finally:
            os.close(fd)
        try:
            return b"".join(chunks).decode("utf-8")
        except UnicodeDecodeError:
            raise ToolError(f"file {show(path)} is not UTF-8 text") from None

    def list(self, path: str) -> str:
        fd = self._open(path, "list")
        try:
            with os.scandir(fd) as it:
                entries = sorted(it, key=lambda e: e.name)
                shown = entries[: self.max_list_entries]
                # while the scan is open: is_dir() of a symlink stats relative to it
                lines = [display_name(e.name) + ("/" if is_dir_entry(e) else "") for e in shown]
        except OSError as exc:
            raise os_error("list", path, exc) from None
        finally:
            os.close(fd)
        if not entries:
            return "(empty directory)"
        more = len(entries) - len(shown)
        if more:
            lines.append(
                f"... and {more} more {'entry' if more == 1 else 'entries'}, not shown "
                f"(list_dir shows at most {self.max_list_entries}; "
                "list a subdirectory to see less at once)"
            )
        return "\n".join(lines)

    def write(self, path: str, content: str) -> str:
        try:
            data = content.encode("utf-8")
        except UnicodeEncodeError:
            raise ToolError(
                f"content for {show(path)} is not valid Unicode text (it holds a lone "
                "surrogate); nothing was written"
            ) from None
        if len(data) > self.max_write_bytes:
            raise ToolError(
                f"content for {show(path)} is {len(data)} bytes, over the write limit of "
                f"{self.max_write_bytes} bytes; nothing was written. Write smaller files"
            )
        if self.read_only is not None:
            raise ToolError(f"cannot write {show(path)}: {self.read_only}")
        fd = self._open(path, "write")
        try:
            os.ftruncate(fd, 0)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        except OSError as exc:
            raise os_error("write", path, exc) from None
        finally:
            os.close(fd)
        return f"wrote {len(data)} bytes to {path}"

    # --- the walk ------------------------------------------------------------

    def _open(self, path: str, mode: _Mode) -> int:
        """A descriptor of what ``path`` names: a directory (list) or a regular
        file (read; write: created if missing). Each component is opened
        relative to the one before it, never following a symlink in the kernel."""
        if "\x00" in path:
            raise ToolError(f"path {show(path)} is not a valid path")
        if path.startswith("/"):
            raise ToolError(f"path {show(path)} is outside the workspace")
        parts: deque[str] = deque(p for p in path.split("/") if p)
        if len(parts) > _MAX_DEPTH:  # refused before any directory is made
            raise ToolError(f"path {show(path)} is too deep; use a shorter path")
        if mode == "write":  # before any directory is made on the way
            for name in parts:
                self._check_name(name, path)
        fds = [self._open_root(path, mode)]
        ids = [self.root_id]
        result: int | None = None
        try:
            if mode == "write":
                refuse_git_dir(fds[0], path)
            links = steps = 0
            while parts:
                name = parts.popleft()
                if name == ".":
                    continue
                if name == "..":
                    if len(fds) == 1:
                        raise ToolError(f"path {show(path)} is outside the workspace")
                    os.close(fds.pop())
                    ids.pop()
                    continue
                steps += 1
                if steps > _MAX_STEPS or len(fds) > _MAX_DEPTH:
                    raise ToolError(
                        f"path {show(path)} is too deep (or kept changing while it was "
                        "opened); use a shorter path"
                    )
                self._check_entry(ids[-1], name, mode, path)
                as_dir = bool(parts) or mode == "list"
                try:
                    if as_dir:
                        opened = self._open_dir(fds[-1], name, mode, path, last=not parts)
                    else:
                        opened = self._open_file(fds[-1], name, mode, path)
                except OSError as exc:
                    raise os_error(mode, path, exc) from None
                if opened is None:  # created, or changed under us: open it again
                    parts.appendleft(name)
                    continue
                if isinstance(opened, str):  # a symlink: walk its target instead
                    links += 1
                    if links > _MAX_LINKS:
                        raise ToolError(f"path {show(path)} is not a valid path")
                    inside = self._inside(opened)
                    if inside is None:
                        raise ToolError(f"path {show(path)} is outside the workspace")
                    if inside is not opened:  # absolute: start again from the root
                        while len(fds) > 1:
                            os.close(fds.pop())
                            ids.pop()
                    parts.extendleft(reversed([p for p in inside.split("/") if p]))
                    continue
                fd, st = opened
                if as_dir:
                    fds.append(fd)
                    ids.append((st.st_dev, st.st_ino))
                else:
                    result = fd
            if mode == "list":
                result = fds.pop()
            elif result is None:
                if mode == "read":
                    raise ToolError(
                        f"path {show(path)} is a directory; use list_dir to see what it holds"
                    )
                raise ToolError(f"path {show(path)} is a directory; name a file to write")
            return result
        except BaseException:
            if result is not None:
                os.close(result)
            raise
        finally:
            for fd in fds:
                os.close(fd)

    def _open_root(self, path: str, mode: _Mode) -> int:
        try:
            fd = os.open(self.root, _DIR_FLAGS)
        except OSError:
            fd = -1
        if fd >= 0:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) == self.root_id:
                return fd
            os.close(fd)
        raise ToolError(
            f"cannot {mode} {show(path)}: the workspace directory was removed or replaced "
            "after the tools were set up; start again with an existing workspace"
        )

    def _inside(self, target: str) -> str | None:
        """A symlink's target relative to the directory holding it, or (a new
        string) relative to the root; ``None`` when it is absolute and elsewhere."""
        if not target.startswith("/"):
            return target
        for prefix in self.prefixes:
            if prefix == "/":
                return "./" + target
            if target == prefix or target.startswith(prefix + "/"):
                return "./" + target[len(prefix) :]
        return None

    def _check_name(self, name: str, path: str) -> None:
        if norm(name) in self.protected_names:
            names = ", ".join(sorted(self.protected_names))
            raise ToolError(
                f"cannot write {show(path)}: it is version-control metadata ({names}), "
                "which the fs tools never write; change the working-tree files instead"
            )

    def _check_entry(self, dir_id: Id, name: str, mode: _Mode, path: str) -> None:
        if mode == "write":
            self._check_name(name, path)
        if (*dir_id, norm(name)) in self.rules.entries:
            raise protected_error(path)

    def _check_opened(self, st: os.stat_result, path: str) -> None:
        if (st.st_dev, st.st_ino) in self.rules.objects:
            raise protected_error(path)

    def _open_dir(
        self, dir_fd: int, name: str, mode: _Mode, path: str, *, last: bool
    ) -> tuple[int, os.stat_result] | str | None:
        try:
            fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
        except FileNotFoundError:
            if mode != "write":
                raise
            with creating(dir_fd, name, path), contextlib.suppress(FileExistsError):
                os.mkdir(name, 0o777, dir_fd=dir_fd)  # made meanwhile: open that
            return None  # open what is there now
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise
            try:
                return os.readlink(name, dir_fd=dir_fd)
            except OSError:
                pass
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode) or stat.S_ISLNK(st.st_mode):
                return None  # it changed under us: look again
            if not last:
                raise exc
            if stat.S_ISREG(st.st_mode):
                raise ToolError(
                    f"path {show(path)} is a file, not a directory; use read_file to read it"
                ) from None
            raise not_regular(path, st.st_mode) from None
        try:
            st = os.fstat(fd)
            self._check_opened(st, path)
            if mode == "write":
                refuse_git_dir(fd, path)
        except BaseException:
            os.close(fd)
            raise
        return fd, st

    def _open_file(
        self, dir_fd: int, name: str, mode: _Mode, path: str
    ) -> tuple[int, os.stat_result] | str | None:
        try:
            before: os.stat_result | None = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            if mode != "write":
                raise
            before = None
        if before is not None:
            if stat.S_ISLNK(before.st_mode):
                try:
                    return os.readlink(name, dir_fd=dir_fd)
                except OSError:
                    return None
            self._check_kind(before, mode, path)
        try:
            if before is None:  # write a new file
                with creating(dir_fd, name, path):
                    fd = os.open(name, _CREATE_FLAGS, _NEW_FILE_MODE, dir_fd=dir_fd)
            else:
                flags = _REWRITE_FLAGS if mode == "write" else _READ_FLAGS
                fd = os.open(name, flags, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.EISDIR):
                return None  # it became a symlink or a directory since the stat
            if exc.errno == errno.ENOENT and before is not None:
                return None  # it vanished since the stat: look again (a new file is checked)
            if exc.errno == errno.ENXIO:  # a FIFO without a reader, or a device
                raise not_regular(path, stat.S_IFIFO) from None
            raise
        try:
            st = os.fstat(fd)
            self._check_kind(st, mode, path)
            self._check_opened(st, path)
            if st.st_nlink > 1:
                self._check_linked(st, mode, path)
        except BaseException:
            os.close(fd)
            raise
        return fd, st

    def _check_linked(self, st: os.stat_result, mode: _Mode, path: str) -> None:
        """A file with other names: never written; read only when no protected
        place is on its file system (a hard link cannot leave it, and nothing
        short of searching the whole disk finds the other names)."""
        if mode == "write":
            raise ToolError(
                f"cannot write {show(path)}: the file has {st.st_nlink} hard links, so "
                "writing it would also change it under its other names, possibly outside "
                "the workspace; write a new file instead"
            )
        if st.st_dev in self.rules.devices:
            raise ToolError(
                f"cannot read {show(path)}: the file has {st.st_nlink} hard links and lies on "
                "the same file system as a protected place (the session store, tapelog's own "
                "files or the user's login and key files), so it may be one of those under "
                "another name; the fs tools do not read such files. Ask the user for a copy"
            )

    def _check_kind(self, st: os.stat_result, mode: _Mode, path: str) -> None:
        if stat.S_ISDIR(st.st_mode):
            if mode == "read":
                raise ToolError(
                    f"path {show(path)} is a directory; use list_dir to see what it holds"
                )
            raise ToolError(f"path {show(path)} is a directory; name a file to write")
        if not stat.S_ISREG(st.st_mode):
            raise not_regular(path, st.st_mode)
