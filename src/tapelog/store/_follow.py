"""Following a stored session: the events appended after a seq, as they arrive.

A reader that shows a session while it runs (``tapelog serve``) must not read
the whole log again for every update, nor know how a backend keeps it. The
store port gives it a :class:`Follower`: the stored lines (each event's
canonical bytes, exactly what loading reads) from a seq on, in order, each
as soon as a flush made it durable. How a follower learns that something was
appended is the backend's business (a JSONL file is watched for growth; a
PostgreSQL writer notifies on every flush, so its follower reads rows only
when told to).

Every line a follower hands out starts with its own seq (canonical JSON begins
``{"seq":N,``), so the follower checks that they follow one another without a
gap; a stored log that no longer extends what was handed out (a file rewritten
or cut) raises :class:`~tapelog.StoreError`, and the reader loads the session
again. A follower checks nothing else: replaying the lines through
``Session.replay`` (and checking each ``log/digest``) is the reader's job, as
it is when loading.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Iterator
from types import TracebackType
from typing import Final

from tapelog._errors import StoreError

__all__ = ["Follower", "line_seq"]

_SEQ: Final = re.compile(rb'\{"seq":(\d+),')
_WAIT_S: Final = 1.0


def line_seq(line: bytes) -> int | None:
    """The seq a canonical event line starts with, read without decoding it."""
    match = _SEQ.match(line)
    return None if match is None else int(match.group(1))


class Follower(ABC):
    """The events of one session from seq ``next_seq`` on (see the module docstring).

    :meth:`poll` returns what is stored now (waiting up to ``timeout`` seconds
    for something when nothing is); iterating yields lines as they arrive,
    until :meth:`close`. Use it as a context manager: a follower may hold a
    connection. Not thread-safe: one reader at a time.
    """

    def __init__(self, session_id: str, since: int) -> None:
        self.session_id = session_id
        self.next_seq = since
        """The seq of the next line :meth:`poll` returns."""
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def poll(self, timeout: float = 0.0) -> list[bytes]:
        """The lines stored after those returned so far (none: waits up to
        ``timeout`` seconds for a flush, then reads again)."""
        if self._closed:
            raise StoreError(f"the follower of session {self.session_id} is closed")
        lines = self._checked(self._read())
        if not lines and timeout > 0 and self._wait(timeout):
            lines = self._checked(self._read())
        return lines

    def _checked(self, lines: list[bytes]) -> list[bytes]:
        for k, line in enumerate(lines):
            if line_seq(line) != self.next_seq + k:
                raise StoreError(
                    f"session {self.session_id} no longer extends what was read (seq "
                    f"{self.next_seq + k} was expected next); load it again"
                )
        self.next_seq += len(lines)
        return lines

    def __iter__(self) -> Iterator[bytes]:
        while not self._closed:
            yield from self.poll(_WAIT_S)

    def close(self) -> None:
        """Stop following and release what the follower holds (idempotent)."""
        if not self._closed:
            self._closed = True
            self._release()

    def __enter__(self) -> Follower:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @abstractmethod
    def _read(self) -> list[bytes]:
        """The complete lines stored from ``next_seq`` on (the backend moves its
        own position past them); :class:`StoreError` if the stored log no longer
        extends what was read."""

    @abstractmethod
    def _wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a flush; whether one may have happened."""

    @abstractmethod
    def _release(self) -> None:
        """Release connections or handles (called once, by :meth:`close`)."""
