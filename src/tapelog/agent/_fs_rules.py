"""What the ``fs`` toolset protects, and how it names paths in what the model reads.

Protected places (docs/security.md, "Workspace and tools"): version-control
metadata by name (any case, at any depth) and any directory that is a git
directory by its contents are never written; the session store, tapelog's own
data and the user's login and key files are neither read, listed nor written.
Places are matched by identity (device and inode, or an entry name inside a
directory), so a symlink, ``..`` or another spelling reaches the same refusal.
Messages name paths as the model gave them, never a host path.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Final

from tapelog._errors import ToolError

__all__ = [
    "DEFAULT_PROTECTED_NAMES",
    "HOME_PROTECTED",
    "Id",
    "Rules",
    "data_paths",
    "display_name",
    "home_paths",
    "is_dir_entry",
    "norm",
    "not_regular",
    "os_error",
    "positive",
    "protected_error",
    "real_path",
    "show",
]

Id = tuple[int, int]

_SHOWN_CHARS: Final = 256

DEFAULT_PROTECTED_NAMES: Final = (".git", ".hg", ".svn", ".jj", ".bzr")
"""Directory (or file) names never written, compared case-insensitively at any depth."""

HOME_PROTECTED: Final = (
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".zlogout",
    ".gitconfig",
    ".ssh",
    ".gnupg",
    ".config",
    ".local",
)
"""Paths under ``$HOME`` protected by default: files that run code at login or
on the next ``git`` command, keys, and per-user configuration and programs.
They matter when the workspace is the home directory (or above it)."""

# Code points some file systems ignore in names (HFS+), so ".g\u200cit" is ".git" there.
_IGNORABLE: Final = dict.fromkeys(
    [*range(0x200C, 0x2010), *range(0x202A, 0x202F), *range(0x206A, 0x2070), 0xFEFF]
)


def norm(name: str) -> str:
    """A name as case-insensitive and Windows- or macOS-mounted file systems compare it."""
    return name.translate(_IGNORABLE).rstrip(". ").casefold()


def show(path: str) -> str:
    """A model-given path for a message: quoted, and cut if very long."""
    if len(path) <= _SHOWN_CHARS:
        return repr(path)
    return f"{path[:_SHOWN_CHARS]!r}... ({len(path)} characters)"


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def display_name(name: str) -> str:
    """A directory entry's name as valid UTF-8 (the log holds nothing else)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return name


class Rules:
    """Protected places, by identity: a directory or file (device, inode), and
    an entry name inside a directory (for paths that do not exist yet, or are
    replaced later)."""

    def __init__(self) -> None:
        self.objects: set[Id] = set()
        self.entries: set[tuple[int, int, str]] = set()
        self.devices: set[int] = set()
        """File systems holding a protected place: a hard link there may be one of them."""

    def add(self, path: Path) -> None:
        """Protect ``path`` (absolute, resolved as far as it exists)."""
        missing: list[str] = []
        current = path
        while True:
            try:
                st = os.stat(current)
            except FileNotFoundError:
                if current.parent == current:
                    return
                missing.append(current.name)
                current = current.parent
                continue
            except OSError:
                return
            break
        self.devices.add(st.st_dev)
        if missing:  # the first missing name below what exists: everything under it
            self.entries.add((st.st_dev, st.st_ino, norm(missing[-1])))
            return
        self.objects.add((st.st_dev, st.st_ino))
        if current.parent != current:
            try:
                parent = os.stat(current.parent)
            except OSError:
                return
            self.entries.add((parent.st_dev, parent.st_ino, norm(current.name)))


def data_paths() -> list[Path]:
    """tapelog's own data: the default store's parent directory and ``$TAPELOG_STORE``."""
    data_home = os.environ.get("XDG_DATA_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "share"
    )
    paths = [Path(data_home) / "tapelog"]
    env = os.environ.get("TAPELOG_STORE")
    if env and "://" not in env:
        paths.append(Path(env))
    return paths


def home_paths() -> list[Path]:
    home = Path(os.path.expanduser("~"))
    return [home / name for name in HOME_PROTECTED] if home.is_absolute() else []


def real_path(path: str | os.PathLike[str]) -> Path:
    return Path(os.path.abspath(os.path.expanduser(os.fspath(path)))).resolve()


def protected_error(path: str) -> ToolError:
    return ToolError(
        f"path {show(path)} is protected (the session store, tapelog's own files or the "
        "user's login and key files); the fs tools do not read, list or write it"
    )


def not_regular(path: str, mode: int) -> ToolError:
    return ToolError(
        f"path {show(path)} is {_kind(mode)}, not a regular file or directory; "
        "the fs tools read and write regular files only"
    )


def is_dir_entry(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def os_error(verb: str, path: str, exc: OSError) -> ToolError:
    """An OS error as a sentence naming the path as given (``str(exc)`` has the host path)."""
    shown = show(path)
    if isinstance(exc, FileNotFoundError):
        return ToolError(f"path {shown} does not exist")
    if isinstance(exc, NotADirectoryError | FileExistsError):
        return ToolError(f"cannot {verb} {shown}: a parent of it is a file, not a directory")
    if isinstance(exc, PermissionError):
        return ToolError(f"cannot {verb} {shown}: permission denied")
    if exc.errno == errno.ENAMETOOLONG:
        return ToolError(
            f"cannot {verb} {shown}: a name in the path is longer than the file system allows "
            "(255 bytes); use shorter names"
        )
    reason = exc.strerror or type(exc).__name__
    return ToolError(f"cannot {verb} {shown}: {reason}")


def positive(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ToolError(f"{name} must be a positive number, not {value!r}")
    return value
