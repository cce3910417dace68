"""The ``fs`` toolset: ``read_file``, ``list_dir`` and ``write_file`` over one workspace.

What is protected is decided here, once, when the tools are made (the
defaults, the caller's paths, a workspace that lies inside a protected place);
every call then walks its path with :class:`tapelog.agent._fs.Workspace`.
docs/security.md, "Workspace and tools", says what this defends against.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from tapelog._errors import ToolError
from tapelog.agent._fs import (
    DEFAULT_MAX_LIST_ENTRIES,
    DEFAULT_MAX_READ_BYTES,
    DEFAULT_MAX_WRITE_BYTES,
    Workspace,
)
from tapelog.agent._fs_git import read_only_reason
from tapelog.agent._fs_rules import (
    DEFAULT_PROTECTED_NAMES,
    Rules,
    data_paths,
    home_paths,
    norm,
    positive,
    real_path,
)
from tapelog.agent._tools import Toolset, tool

__all__ = ["fs_tools"]


def fs_tools(
    workspace: str | os.PathLike[str],
    *,
    protected: Iterable[str | os.PathLike[str]] = (),
    protected_names: Iterable[str] = DEFAULT_PROTECTED_NAMES,
    protect_defaults: bool = True,
    max_read_bytes: int = DEFAULT_MAX_READ_BYTES,
    max_write_bytes: int = DEFAULT_MAX_WRITE_BYTES,
    max_list_entries: int = DEFAULT_MAX_LIST_ENTRIES,
) -> Toolset:
    """``read_file``, ``list_dir`` and ``write_file``, confined to ``workspace``.

    The workspace must be an existing directory; it is resolved once, here.

    ``protected``: host paths (directories or files, existing or not) no tool
    may read, list or write, in addition to the defaults: pass the session
    store's directory. ``protect_defaults`` (on) adds tapelog's data directory
    (``$XDG_DATA_HOME/tapelog``, ``~/.local/share/tapelog``), a directory
    ``$TAPELOG_STORE`` and :data:`HOME_PROTECTED` under the home directory. A
    workspace inside tapelog's data or a ``protected`` path is refused; one
    inside a default home path is the user's choice and that path is then not
    protected from it.

    ``protected_names``: names never written at any depth (compared ignoring
    case), :data:`DEFAULT_PROTECTED_NAMES` by default; directories that are git
    directories by content are never written whatever their name.

    ``max_read_bytes`` (256 KiB): larger files are refused. ``max_write_bytes``
    (1 MiB): larger content is refused. ``max_list_entries`` (1,000): a listing
    shows that many entries and says how many more there are.
    """
    given = os.fspath(workspace)
    root = Path(given)
    if not root.is_dir():
        raise ToolError(f"workspace {given!r} is not a directory; create it first")
    root = root.resolve()
    names = frozenset(norm(n) for n in protected_names)
    rules = Rules()
    strict = [real_path(p) for p in protected]
    home: list[Path] = []
    if protect_defaults:
        strict += [real_path(p) for p in data_paths()]
        home = [real_path(p) for p in home_paths()]
    for path in strict:
        if root.is_relative_to(path):
            raise ToolError(
                f"workspace {given!r} is inside {str(path)!r}, which the fs tools protect "
                "(tapelog's sessions or a protected path); choose a workspace outside it"
            )
        rules.add(path)
    for path in home:
        if not root.is_relative_to(path):
            rules.add(path)
    ws = Workspace(
        given,
        root,
        rules=rules,
        protected_names=names,
        read_only=read_only_reason(root, names),
        max_read_bytes=positive("max_read_bytes", max_read_bytes),
        max_write_bytes=positive("max_write_bytes", max_write_bytes),
        max_list_entries=positive("max_list_entries", max_list_entries),
    )

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
