"""The conversation index a store keeps for the proxy: an append-only list of points.

A proxy replica records, each time a turn of one of its sessions ends, where
that conversation now stands: a :class:`PointRecord` (the digest of the
session's message history, its length, the seq of the ``turn/end``, the
loose key of its last answer, and the upstream's response id when the turn
logged one). Every replica reads the records it has not
seen yet (:meth:`PointLog.read` from its cursor) before it matches a request,
and folds them, in the store's order, into its in-memory index
(``tapelog.proxy._index``). So the index lives in the store, not in any one
process: any replica routes any request of a conversation to its one session,
and a replica started later reads every record from the start.

The records are derived data: every one of them can be rebuilt from the
sessions' logs (the proxy does so when the list is empty, e.g. for sessions
stored before it existed), and losing the newest one (a crash between a
flush and its record) only means a request matches the point before it,
whose session the proxy then opens and plans against the log itself.
Each backend keeps the list its own way: a table for PostgreSQL
(``_pg_points``), a file beside the session files for JSONL (``_jsonl_points``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tapelog._errors import JsonValueError
from tapelog.log import decode, encode

__all__ = ["PointLog", "PointRecord"]


@dataclass(frozen=True, slots=True)
class PointRecord:
    """Session ``session_id`` stood at seq ``seq`` with a history of ``length``
    messages whose chain digest is ``digest``; ``anchor`` is the loose key of
    its last message when that is an answer (``None`` otherwise), and ``retry``
    the chain digest of the history without that answer (what a client that
    sends its last request again sends); ``alternatives`` are the loose keys of
    that answer's other choices (``n`` > 1: a client may keep any of them);
    ``response_id`` the upstream's id of the response turn ``turn`` logged there
    (the Responses API: a later request may continue it by id, on any replica).
    A record with ``length == 0`` says the session has no point any more."""

    session_id: str
    digest: bytes
    length: int
    seq: int
    anchor: bytes | None = None
    retry: bytes | None = None
    alternatives: tuple[bytes, ...] = ()
    response_id: str | None = None
    turn: int | None = None

    def encode(self) -> bytes:
        """The record as one canonical JSON line (without its newline)."""
        data: dict[str, Any] = {
            "session": self.session_id,
            "digest": self.digest.hex(),
            "length": self.length,
            "seq": self.seq,
        }
        if self.anchor is not None:
            data["anchor"] = self.anchor.hex()
        if self.retry is not None:
            data["retry"] = self.retry.hex()
        if self.alternatives:
            data["alternatives"] = [a.hex() for a in self.alternatives]
        if self.response_id is not None:
            data["response_id"] = self.response_id
        if self.turn is not None:
            data["turn"] = self.turn
        return encode(data)

    @classmethod
    def decode(cls, line: bytes) -> PointRecord | None:
        """The record of a line :meth:`encode` wrote (``None``: not one; a line a
        crash cut short, say)."""
        try:
            data = decode(line)
            anchor, retry = data.get("anchor"), data.get("retry")
            response_id, turn = data.get("response_id"), data.get("turn")
            return cls(
                session_id=str(data["session"]),
                digest=bytes.fromhex(data["digest"]),
                length=int(data["length"]),
                seq=int(data["seq"]),
                anchor=None if anchor is None else bytes.fromhex(anchor),
                retry=None if retry is None else bytes.fromhex(retry),
                alternatives=tuple(bytes.fromhex(a) for a in data.get("alternatives", ())),
                response_id=None if response_id is None else str(response_id),
                turn=None if turn is None else int(turn),
            )
        except (JsonValueError, KeyError, TypeError, ValueError, AttributeError):
            return None


class PointLog(ABC):
    """A store's list of :class:`PointRecord` (see the module docstring).

    Positions are opaque non-negative integers: ``read(0)`` reads from the
    start, and each read returns the position to read from next. Safe to use
    from several threads and processes at once; appends by different
    processes are read back in one order by every reader.
    """

    @abstractmethod
    def append(self, records: Sequence[PointRecord]) -> None:
        """Add ``records`` (in order) after every record stored so far."""

    @abstractmethod
    def read(self, position: int) -> tuple[list[PointRecord], int]:
        """The records after ``position``, in order, and the position after them."""

    @abstractmethod
    def close(self) -> None:
        """Let go of any connection or handle (the log may be used again after)."""
