"""Incremental summaries of a JSONL store (:mod:`._summaries`): files and byte offsets.

A session file only ever grows by whole lines, except when a writer opening
the session cuts a torn last line. So a summary stays valid while the file's
(inode, size, mtime) is the same; a file that grew on the same inode, and
still has the same 64 bytes before the folded offset, is folded from that
offset on; anything else (a new inode, a file no longer than what was folded,
other bytes before that offset) is folded again from the start. An edit
further back in a file that also grew is not seen here (only the new bytes
are read); loading the session checks its digests, which catch it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import BinaryIO, Final

from tapelog._errors import InvalidSessionIdError
from tapelog.store._ids import validate_session_id
from tapelog.store._summaries import Cursor, F, Folded, read_header

__all__ = ["jsonl_summaries", "last_line"]

_SUFFIX: Final = ".jsonl"
_TAIL: Final = 64


def jsonl_summaries(
    root: Path, previous: Mapping[str, Folded[F]], new_fold: Callable[[], F]
) -> dict[str, Folded[F]]:
    """Every session file's summary under ``root`` (see the module docstring)."""
    out: dict[str, Folded[F]] = {}
    try:
        scan = os.scandir(root)
    except OSError:
        return out  # no store yet: no sessions
    with scan:
        for item in scan:
            name = item.name
            if not name.endswith(_SUFFIX) or name.startswith("."):
                continue
            try:
                session_id = validate_session_id(name[: -len(_SUFFIX)])
                if not item.is_file():
                    continue
                st = item.stat()
            except (InvalidSessionIdError, OSError):
                continue  # not a session file, or removed meanwhile
            key = (st.st_ino, st.st_size, st.st_mtime_ns)
            old = previous.get(session_id)
            if old is not None and old.cursor.key == key:
                out[session_id] = old
            else:
                out[session_id] = _fold(session_id, item.path, key, old, new_fold)
    return out


def _fold(
    session_id: str,
    path: str,
    key: tuple[int, ...],
    old: Folded[F] | None,
    new_fold: Callable[[], F],
) -> Folded[F]:
    """Fold the file (from ``old``'s offset when it still extends what was folded)."""
    try:
        with open(path, "rb") as f:
            if old is not None and _extends(f, old, key):
                folded = old.continued()
                base = old.cursor.offset
                data = f.read()
            else:
                folded, base = Folded(id=session_id, fold=new_fold()), 0
                data = f.read()
                end = data.find(b"\n")
                if end < 0:
                    folded.error = "line 1: the header line is incomplete (never started)"
                    folded.cursor = Cursor(key)
                    return folded
                read_header(folded, data[:end])
                base, data = end + 1, data[end + 1 :]
    except OSError as exc:
        folded = Folded(id=session_id, fold=new_fold(), cursor=Cursor(key))
        folded.error = f"cannot read the file: {exc.strerror or exc}"
        return folded
    complete = data.rfind(b"\n") + 1
    if folded.error is None and complete:
        folded.extend(data[: complete - 1].split(b"\n"))
    tail = data[max(complete - _TAIL, 0) : complete]
    if len(tail) < _TAIL and old is not None and base == old.cursor.offset:
        tail = (bytes.fromhex(old.cursor.tail) + tail)[-_TAIL:]
    folded.cursor = Cursor(key, base + complete, tail.hex())
    return folded


def _extends(f: BinaryIO, old: Folded[F], key: tuple[int, ...]) -> bool:
    """Whether the open file still holds, before ``old``'s offset, the bytes folded."""
    cursor = old.cursor
    tail = bytes.fromhex(cursor.tail)
    if old.error is not None or cursor.offset == 0 or not tail or len(cursor.key) != 3:
        return False
    if key[0] != cursor.key[0] or key[1] <= cursor.offset:
        return False  # another file, or one rewritten without growing: fold it again
    f.seek(cursor.offset - len(tail))
    if f.read(len(tail)) != tail:
        f.seek(0)
        return False
    return True


def last_line(f: BinaryIO, *, start: int, size: int, block: int) -> bytes | None:
    """The last newline-terminated line after byte ``start``, read from the end
    ``block`` bytes at a time (``list()``'s summary needs nothing else)."""
    buf = b""
    pos = size
    while pos > start:
        step = min(block, pos - start)
        pos -= step
        f.seek(pos)
        buf = f.read(step) + buf
        end = buf.rfind(b"\n")
        if end == -1:
            continue
        begin = buf.rfind(b"\n", 0, end)
        if begin != -1:
            return buf[begin + 1 : end]
        if pos == start:
            return buf[:end]
    return None
