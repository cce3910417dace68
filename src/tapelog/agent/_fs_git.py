"""Why the ``fs`` tools never write in, nor assemble, a git directory.

git takes a directory holding ``HEAD`` with ``objects`` and ``refs`` (or with
``commondir``) for a repository, and runs what its ``config`` says (a pager,
``core.fsmonitor``, hooks). The tools write no such directory, and no two of
the names git looks for there (:data:`GIT_NAMES`) may share a directory: a
write that would create one of them next to another is refused.

The check and the creation are one step. Tool calls run in parallel on worker
threads, and a model once sent ``HEAD``, ``objects/...`` and ``refs/...`` as
three concurrent calls that each saw the other two missing. So a name of
:data:`GIT_NAMES` is checked and created while holding a lock of the whole
process (every toolset, every agent: workspaces may nest or be spelled
differently) and an exclusive ``flock`` on the directory (other tapelog
processes on the same workspace). Only these names take the lock, for a few
system calls.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from tapelog._errors import ToolError
from tapelog.agent._fs_rules import norm, show

__all__ = ["GIT_NAMES", "creating", "read_only_reason", "refuse_git_dir"]

# git's own test of a git directory: HEAD, and objects and refs, or commondir
# (a linked worktree's directory).
_GIT_MARKERS: Final = ("HEAD", "objects", "refs", "commondir")
GIT_NAMES: Final = (*_GIT_MARKERS, "config", "gitdir")
"""Names git reads in a git directory; the tools never put two in one directory."""
_GIT_NAME_OF: Final = {name.casefold(): name for name in GIT_NAMES}
_CREATING: Final = threading.Lock()
"""Held while a name of GIT_NAMES is checked and created, by any toolset of the process."""


def _is_git_dir(found: set[str]) -> bool:
    return "HEAD" in found and ("commondir" in found or {"objects", "refs"} <= found)


def _present(dir_fd: int) -> set[str]:
    """The names of :data:`GIT_NAMES` in a directory, as git would find them."""
    found: set[str] = set()
    for name in GIT_NAMES:
        try:
            os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            continue
        found.add(name)
    return found


def refuse_git_dir(dir_fd: int, path: str) -> None:
    """Refuse a write inside a directory that is a git directory by content."""
    if _is_git_dir(_present(dir_fd)):
        raise ToolError(
            f"cannot write {show(path)}: it is inside a git directory (HEAD with "
            "objects and refs), which the fs tools never write; change the working-tree "
            "files instead"
        )


@contextlib.contextmanager
def _flocked(dir_fd: int) -> Iterator[None]:
    """An exclusive ``flock`` on the directory, if its file system has them."""
    try:
        fcntl.flock(dir_fd, fcntl.LOCK_EX)
        locked = True
    except OSError:  # no flock here (some network or FUSE file systems): the process lock holds
        locked = False
    try:
        yield
    finally:
        if locked:
            fcntl.flock(dir_fd, fcntl.LOCK_UN)


@contextlib.contextmanager
def creating(dir_fd: int, name: str, path: str) -> Iterator[None]:
    """Create ``name`` in the directory within this block: refused (before the
    block) when it is one of :data:`GIT_NAMES` and another is there already,
    and no other such name can appear until the block ends."""
    wanted = _GIT_NAME_OF.get(norm(name))
    if wanted is None:
        yield
        return
    with _CREATING, _flocked(dir_fd):
        held = _present(dir_fd) - {wanted}
        if held:
            shown = ", ".join(n for n in GIT_NAMES if n in held)
            raise ToolError(
                f"cannot write {show(path)}: its directory already holds {shown}, and the fs "
                "tools never put two of HEAD, objects, refs, config, commondir and gitdir in "
                "one directory (together they can make a git directory, whose configuration "
                "git runs); use another name or directory"
            )
        yield


def read_only_reason(root: Path, names: frozenset[str]) -> str | None:
    """Why no write can be allowed anywhere in the workspace, if the root itself
    lies inside version-control metadata (no host path: the model reads it)."""
    for directory in (root, *root.parents):
        if norm(directory.name) in names:
            return "the workspace lies inside version-control metadata, which is never written"
        if _is_git_dir({m for m in _GIT_MARKERS if os.path.lexists(directory / m)}):
            return "the workspace lies inside a git directory, which is never written"
    return None
