"""Checking a stored session file and saying everything that is wrong with it.

``load`` stops at the first problem; ``tapelog verify`` wants the full list. So
this runs the same scanner over every line (JSON, envelope, known type,
canonical bytes), then replays the intact prefix through ``Session`` for the
semantic rules (contiguity, payloads, surface ops, header fold) up to the
first semantic error, after which nothing further can be judged.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from tapelog._errors import CorruptLogError, LogError
from tapelog.log import Session, SessionInfo, open_turn_at, paused_gc
from tapelog.request import walk_requests
from tapelog.store._format import Problem, replay_events, scan_jsonl

__all__ = ["LogStats", "VerifyReport", "verify_jsonl"]


@dataclass(frozen=True, slots=True, kw_only=True)
class LogStats:
    """Counts for the one-line summary of a valid log."""

    events: int
    turns: int
    requests: int
    header_snapshots: int
    header_deltas: int

    @classmethod
    def of(cls, session: Session, *, requests: int | None = None) -> LogStats:
        """Counts of ``session``; ``requests`` is the number of requests it sent
        (default: every ``step/start``, which counts steps that never sent one)."""
        counts = Counter(event.type for event in session.events)
        return cls(
            events=len(session),
            turns=counts["turn/start"],
            requests=counts["step/start"] if requests is None else requests,
            header_snapshots=counts["request/header"],
            header_deltas=counts["request/header-delta"],
        )

    def __str__(self) -> str:
        return ", ".join(
            _count(n, noun)
            for n, noun in (
                (self.events, "event"),
                (self.turns, "turn"),
                (self.requests, "request"),
                (self.header_snapshots, "header snapshot"),
                (self.header_deltas, "header delta"),
            )
        )


def _count(n: int, noun: str) -> str:
    """``1 turn``, ``0 turns``, ``2 turns``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifyReport:
    """The verdict on one session file: valid iff ``problems`` is empty.

    ``warnings`` are tolerated damage (a torn final line); ``notes`` are facts
    worth knowing that are not damage (a turn left open by a crash, which
    resuming closes).
    """

    info: SessionInfo | None
    problems: tuple[Problem, ...]
    warnings: tuple[str, ...]
    notes: tuple[str, ...]
    session: Session | None
    stats: LogStats | None

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_jsonl(data: bytes, *, expected_id: str | None = None) -> VerifyReport:
    """Verify a session file's bytes; ``expected_id`` is the id its name implies."""
    with paused_gc():
        return _verify(data, expected_id)


def _verify(data: bytes, expected_id: str | None) -> VerifyReport:
    scan = scan_jsonl(data, check_canonical=True)
    problems = list(scan.problems)
    if scan.spaced:
        count = len(scan.spaced)
        scan.warnings.append(
            f"{count} line{'s' if count != 1 else ''} (first: line {scan.spaced[0]}) "
            "differ from tapelog's canonical bytes only by whitespace between JSON tokens "
            "(written by another encoder); the events are intact"
        )
    info = scan.info
    if info is not None and expected_id is not None and info.id != expected_id:
        problems.append(
            Problem(
                line=1,
                seq=None,
                error=CorruptLogError(
                    f"the header names session {info.id!r}, but the file is stored as "
                    f"{expected_id!r}; a session file must be named after its id",
                    line=1,
                ),
            )
        )
    # Replay even under a damaged header: the events can still be judged.
    replay_info = info or SessionInfo(id="unknown", created=0)
    session: Session | None = None
    try:
        session = replay_events(replay_info, scan.events)
    except CorruptLogError as exc:
        line = exc.line if exc.line is not None else 0
        problems.append(Problem(line=line, seq=line - 2, error=exc))
    requests = None
    if session is not None:
        requests, problem = _walk(session)
        if problem is not None:
            problems.append(problem)
    problems.sort(key=lambda p: p.line)
    notes: list[str] = []
    if session is not None and len(session):
        turn = open_turn_at(session.events, len(session) - 1)
        if turn is not None:
            notes.append(
                f"turn {turn} is still open at the end of the log (a writer is still "
                "running it, or stopped mid-turn); if none is, resuming the session closes "
                "it with interrupted events"
            )
    valid = not problems and session is not None
    return VerifyReport(
        info=info,
        problems=tuple(problems),
        warnings=tuple(scan.warnings),
        notes=tuple(notes),
        session=session if valid else None,
        stats=LogStats.of(session, requests=requests) if valid and session is not None else None,
    )


def _walk(session: Session) -> tuple[int | None, Problem | None]:
    """The requests the log says were sent, walked as every audit walks them (so a
    log that verifies can be audited); or the problem that stops the walk."""
    try:
        walked = walk_requests(session, one_shots=True)
        return sum(1 for request in walked if request.kind == "loop"), None
    except LogError as exc:
        seq = exc.seq if exc.seq is not None else 0
        return None, Problem(line=seq + 2, seq=seq, error=CorruptLogError(str(exc), line=seq + 2))
