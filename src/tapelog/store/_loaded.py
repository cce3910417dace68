"""What reading a store gives back: a loaded session, its digest, a listing's summary.

:class:`LoadedSession` carries what a reader had to tolerate and decides what
resuming the log says (the undigested-tail rule of docs/security.md, "What a
digest proves"); :class:`SessionSummary` is one row of ``store.list()``. Every
backend builds these, and the readers (``verify``, ``list``, the CLI) only read
them, so they live apart from the writer and store contract of
:mod:`tapelog.store._base`, which re-exports them.
"""

from __future__ import annotations

from dataclasses import dataclass

from tapelog._errors import UndigestedEventsError
from tapelog.log._api import Session

__all__ = ["Digest", "LoadedSession", "SessionSummary", "count_events"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Digest:
    """A ``log/digest`` event that matched the log: the SHA-256 of the first
    ``bytes`` bytes of the session's JSONL form (everything before its line,
    line ``line`` of the file; seq ``seq``)."""

    line: int
    seq: int
    bytes: int
    sha256: str

    def to_json(self) -> dict[str, int | str]:
        return {"seq": self.seq, "line": self.line, "bytes": self.bytes, "sha256": self.sha256}


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadedSession:
    """A session read from a store, with what the reader had to tolerate.

    ``warnings`` are whole sentences (for example a dropped torn final line);
    an empty tuple means the stored log was read exactly as written.
    """

    session: Session
    warnings: tuple[str, ...] = ()
    digest: Digest | None = None
    """The last ``log/digest`` of the session's own (after a fork's seed); every
    digest was checked against the stored bytes."""
    undigested: int = 0
    """The last events no digest of the session's own covers: those after
    ``digest``, or, when it is ``None``, every event after a fork's seed."""
    torn: bool = False
    """Whether a torn final line (bytes without their newline) was dropped."""

    def undigested_note(self) -> str | None:
        """One sentence for stderr when events are not covered by a digest (else ``None``).

        Every reading command and every resume says it, so that a forged tail
        is never read silently (docs/security.md, "What a digest proves").
        """
        n = self.undigested
        if not n:
            return None
        sid = self.session.id
        which = _seqs(len(self.session) - n, len(self.session) - 1)
        if self.digest is None:
            return (
                f"session {sid}: {count_events(n)} ({which}) {_are(n)} not covered by a digest: "
                "the log has no digest of its own (written by another program, by hand, or "
                "by a tapelog older than digests), so nothing shows whether they were changed"
            )
        return (
            f"session {sid}: {count_events(n)} ({which}) after the last digest (seq "
            f"{self.digest.seq}) {_are(n)} not covered by a digest; every tapelog write ends "
            "with one, so another program added them or a crash cut a write; "
            f"`tapelog verify {sid}` says more"
        )

    def resume_plan(self, *, accept_undigested: bool = False) -> tuple[tuple[str, ...], bool]:
        """What resuming this log says (the writer's warnings), and whether the
        writer must log a digest at once (to cover accepted events); or
        :class:`UndigestedEventsError` when whole events follow the last digest.

        A flush writes its events and the digest that covers them in one write,
        so a crash can cut only that write: what it leaves after the last
        digest is a torn final line, plus (when the write was cut inside a
        later page) whole lines before it. The torn line alone is dropped; whole
        events there are exactly what a forged tail looks like, and resuming
        would cover them with the next digest. So they are refused unless the
        caller accepts them (after looking at them); a log with no digest of its
        own at all (older or hand-written) is only noted.
        """
        n = self.undigested
        note = self.undigested_note()
        if note is None or self.digest is None:
            return self.warnings + ((note,) if note else ()), False
        sid = self.session.id
        which = _seqs(len(self.session) - n, len(self.session) - 1)
        if accept_undigested:
            accepted = (
                f"session {sid}: accepted {count_events(n)} ({which}) after the last digest "
                f"(seq {self.digest.seq}) as asked; a new digest covers {_them(n)} now"
            )
            return (*self.warnings, accepted), True
        torn = ", and a torn final line after them," if self.torn else ""
        raise UndigestedEventsError(
            f"session {sid} was not resumed: {count_events(n)} ({which}) "
            f"{'follows' if n == 1 else 'follow'} the last "
            f"digest (seq {self.digest.seq}){torn} but every tapelog write ends with a digest, "
            "so another program added them (or, rarely, a crash cut a long write); look at "
            f"them with `tapelog show {sid}`, then resume with --accept-undigested "
            "(accept_undigested=True) to keep them under a new digest"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionSummary:
    """What ``store.list()`` knows about a session without replaying it.

    ``events`` and ``last_time`` come from the last complete stored event
    (``None`` when there is none, or when ``error`` says the session could not
    be read); ``size`` is the stored size in bytes.
    """

    id: str
    created: int | None
    parent: str | None
    events: int | None
    last_time: int | None
    size: int
    error: str | None = None


def _seqs(first: int, last: int) -> str:
    return f"seq {first}" if first == last else f"seq {first} to {last}"


def _them(n: int) -> str:
    return "it" if n == 1 else "them"


def _are(n: int) -> str:
    return "is" if n == 1 else "are"


def count_events(n: int) -> str:
    """``1 event``, ``3 events``."""
    return "1 event" if n == 1 else f"{n} events"
