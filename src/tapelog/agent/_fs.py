"""The built-in ``fs`` toolset: read, list and write files inside one workspace.

The model names paths relative to the workspace. Each path is resolved
(following symlinks) before use and anything that lands outside the workspace
is refused, whether it got there by ``..``, an absolute path or a symlink.
Results and errors name paths exactly as the model gave them: host paths would
leak into the log and make the same session produce different bytes on another
machine.

The check happens before the file is opened, so a process racing to swap a
directory for a symlink in between is not defended against; the workspace is
meant to be owned by the agent.
"""

from __future__ import annotations

import os
from pathlib import Path

from tapelog._errors import ToolError
from tapelog.agent._tools import Toolset, tool

__all__ = ["fs_tools"]

DEFAULT_MAX_READ_BYTES = 256 * 1024
"""read_file refuses larger files: one file should not fill the context window."""


class _Workspace:
    def __init__(self, root: Path, max_read_bytes: int) -> None:
        self.root = root
        self.max_read_bytes = max_read_bytes

    def resolve(self, path: str) -> Path:
        if Path(path).is_absolute():
            raise ToolError(f"path {path!r} is outside the workspace")
        try:
            resolved = (self.root / path).resolve()
        except (OSError, ValueError, RuntimeError):
            raise ToolError(f"path {path!r} is not a valid path") from None
        if not resolved.is_relative_to(self.root):
            raise ToolError(f"path {path!r} is outside the workspace")
        return resolved

    def read(self, path: str) -> str:
        target = self.resolve(path)
        if target.is_dir():
            raise ToolError(f"path {path!r} is a directory; use list_dir to see what it holds")
        try:
            with target.open("rb") as f:
                data = f.read(self.max_read_bytes + 1)
        except OSError as exc:
            raise _os_error("read", path, exc) from None
        if len(data) > self.max_read_bytes:
            size = os.stat(target).st_size
            raise ToolError(
                f"file {path!r} is {size} bytes, over the read limit of {self.max_read_bytes} bytes"
            )
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise ToolError(f"file {path!r} is not UTF-8 text") from None

    def list(self, path: str) -> str:
        target = self.resolve(path)
        if target.exists() and not target.is_dir():
            raise ToolError(f"path {path!r} is a file, not a directory; use read_file to read it")
        try:
            entries = sorted(os.scandir(target), key=lambda e: e.name)
        except OSError as exc:
            raise _os_error("list", path, exc) from None
        names = [e.name + "/" if _is_dir(e) else e.name for e in entries]
        return "\n".join(names) if names else "(empty directory)"

    def write(self, path: str, content: str) -> str:
        target = self.resolve(path)
        if target == self.root or target.is_dir():
            raise ToolError(f"path {path!r} is a directory; name a file to write")
        data = content.encode("utf-8")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        except OSError as exc:
            raise _os_error("write", path, exc) from None
        return f"wrote {len(data)} bytes to {path}"


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _os_error(verb: str, path: str, exc: OSError) -> ToolError:
    """An OS error as a sentence naming the path as given (``str(exc)`` has the host path)."""
    if isinstance(exc, FileNotFoundError):
        return ToolError(f"path {path!r} does not exist")
    if isinstance(exc, NotADirectoryError | FileExistsError):
        return ToolError(f"cannot {verb} {path!r}: a parent of it is a file, not a directory")
    if isinstance(exc, PermissionError):
        return ToolError(f"cannot {verb} {path!r}: permission denied")
    reason = exc.strerror or type(exc).__name__
    return ToolError(f"cannot {verb} {path!r}: {reason}")


def fs_tools(workspace: str | Path, *, max_read_bytes: int = DEFAULT_MAX_READ_BYTES) -> Toolset:
    """``read_file``, ``list_dir`` and ``write_file``, confined to ``workspace``.

    The workspace must be an existing directory; it is resolved once, here.
    """
    root = Path(workspace)
    if not root.is_dir():
        raise ToolError(f"workspace {str(workspace)!r} is not a directory; create it first")
    ws = _Workspace(root.resolve(), max_read_bytes)

    @tool
    def read_file(path: str) -> str:
        """Read a UTF-8 text file from the workspace and return its content.

        Args:
            path: File path relative to the workspace root.
        """
        return ws.read(path)

    @tool
    def list_dir(path: str = ".") -> str:
        """List a workspace directory, one entry per line, sorted; directories end in "/".

        Args:
            path: Directory path relative to the workspace root.
        """
        return ws.list(path)

    @tool
    def write_file(path: str, content: str) -> str:
        """Write a UTF-8 text file in the workspace, creating parent directories as needed.

        Replaces the file if it exists.

        Args:
            path: File path relative to the workspace root.
            content: The complete new content of the file.
        """
        return ws.write(path, content)

    return Toolset([read_file, list_dir, write_file])
