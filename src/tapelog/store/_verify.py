"""Checking a stored session file and saying everything that is wrong with it.

``load`` stops at the first problem; ``tapelog verify`` wants the full list. So
this runs the same scanner over every line (JSON, envelope, known type,
canonical bytes, every ``log/digest`` against the bytes before it), then
replays the intact prefix through ``Session`` for the semantic rules
(contiguity, payloads, surface ops, header fold) up to the first semantic
error, after which nothing further can be judged.

The structural rules (turns and steps nest, tool calls are answered before
the next request, a fork's seed ends with its ``session/end-seed``) are
:class:`tapelog.log._rules.LogRules`, which ``load`` and every append keep too; here
the replay reports every event that breaks one (and carries on past it)
rather than stopping at the first. Beyond what ``load`` checks, ``verify``
also checks what only the whole log or its bytes can tell:

* that no tool call of an assistant message is left without its result at
  the end of the log, unless resuming answers it (the open step a crash left,
  which :func:`tapelog.log.plan_repair` closes: then a note says so) or the
  turn handed it to a client (the proxy's ``tool_calls`` turn end): the next
  request would be refused;
* a fork's header: the event after its seed is the ``session/end-seed``;
* that the log ends with a digest, when it has any: every write of a tapelog
  writer ends with one, so complete lines after the last digest mean the
  digest was removed or lines were added, whether a torn final line follows
  them or not (a forger can tear a line as easily as a crash); a log with no
  digest of its own is judged as before digests (``digest`` is ``None``);
* the requests, walked as every audit walks them.
"""

from __future__ import annotations

import gc
from collections import Counter
from dataclasses import dataclass

from tapelog._errors import CorruptLogError, LogError
from tapelog.log._api import (
    Event,
    Session,
    SessionInfo,
    paused_gc,
    plan_repair,
)
from tapelog.request import walk_requests
from tapelog.store._base import Digest
from tapelog.store._format import JsonlScan, Problem, replay_events, scan_jsonl
from tapelog.store._jsonl_bulk import load_jsonl_bulk

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
        counts = Counter(session.events.types())
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
    digest: Digest | None = None
    """The last digest of the session's own that matched (``None``: the log has
    none, e.g. written before tapelog logged digests, or never flushed)."""

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_jsonl(data: bytes, *, expected_id: str | None = None) -> VerifyReport:
    """Verify a session file's bytes; ``expected_id`` is the id its name implies.

    The session of a valid log (in the report) is left out of later garbage
    collections, as a load's is (``paused_gc(freeze=True)``): else the first
    collection after the pause walks all of it (measured: 50 ms at 115,000
    events, a twelfth of the verify). A damaged log's report holds exceptions,
    whose tracebacks only a collection frees: nothing is frozen then."""
    with paused_gc():
        report = _verify(data, expected_id)
        if report.ok:
            gc.freeze()
        return report


def _verify(data: bytes, expected_id: str | None) -> VerifyReport:
    fast = load_jsonl_bulk(data)  # a file with no line-level or replay problem
    session: Session | None
    if fast is not None:
        scan, session = fast
    else:  # line by line, every problem named
        scan, session = _scan_and_replay(data)
    problems = list(scan.problems)
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
    requests = None
    if session is not None:
        problems.extend(_left_unanswered(session))
        requests, problem = _walk(session)
        if problem is not None:
            problems.append(problem)
    digest, last = scan.last_digest, scan.last_digest_line
    if last is not None and scan.after_digest:
        problems.append(_undigested(last, scan.after_digest, torn=scan.good_size != len(data)))
    problems.sort(key=lambda p: p.line)
    notes: list[str] = []
    if session is not None and len(session):
        notes.extend(_open_turn_notes(session))
    valid = not problems and session is not None
    return VerifyReport(
        info=info,
        problems=tuple(problems),
        warnings=tuple(scan.warnings),
        notes=tuple(notes),
        session=session if valid else None,
        stats=(LogStats.of(session, requests=requests) if valid and session is not None else None),
        digest=digest,
    )


def _scan_and_replay(data: bytes) -> tuple[JsonlScan, Session | None]:
    """Every line-level problem of the file (in ``scan.problems``), and the
    session of its intact prefix replayed with every structural break listed
    there too (``None`` after a semantic error, which ends the replay)."""
    scan = scan_jsonl(data, check_canonical=True)
    if scan.spaced:
        count = len(scan.spaced)
        scan.warnings.append(
            f"{count} line{'s' if count != 1 else ''} (first: line {scan.spaced[0]}) "
            "differ from tapelog's canonical bytes only by whitespace between JSON tokens "
            "(written by another encoder); the events are intact"
        )
    # Replay even under a damaged header: the events can still be judged.
    replay_info = scan.info or SessionInfo(id="unknown", created=0)
    session: Session | None = None
    problems = scan.problems

    def rule_broken(event: Event, error: LogError) -> None:
        problems.append(_problem(event, str(error)))

    try:
        session = replay_events(
            replay_info, scan.events, payloads=scan.payloads, rule_breaks=rule_broken
        )
    except CorruptLogError as exc:
        line = exc.line if exc.line is not None else 0
        problems.append(Problem(line=line, seq=line - 2, error=exc))
    return scan, session


def _open_turn_notes(session: Session) -> list[str]:
    """What resuming will close: the turn a crash (or a running writer) left open."""
    plan = plan_repair(session)
    if plan.turn is None:
        return []
    notes = [
        f"turn {plan.turn} is still open at the end of the log (a writer is still "
        "running it, or stopped mid-turn); if none is, resuming the session closes "
        "it with interrupted events"
    ]
    if plan.calls:
        listed = ", ".join(call.call_id for call in plan.calls)
        notes.append(
            f"its open step has tool calls without results ({listed}); the next request "
            "would be refused as it is, and resuming answers them first with interrupted "
            "error results"
        )
    if not plan.sent:
        notes.append(
            "its open step's request never left (no request header is logged); resuming "
            'ends the step with "sent": false'
        )
    return notes


def _undigested(last: int, count: int, *, torn: bool) -> Problem:
    """Whole events after the last digest: an error, torn final line or not.

    A flush writes its events and their digest in one write, so whole lines
    after the last digest are what a forged tail looks like; a crash that cut
    a long write may leave them too, but only the user can tell the two apart,
    so ``verify`` fails and resuming asks for ``--accept-undigested``.
    """
    line = last + 1
    it = "it" if count == 1 else "them"
    then = " (followed by a torn final line)" if torn else ""
    return Problem(
        line=line,
        seq=line - 2,
        error=CorruptLogError(
            f"line {line}: {_count(count, 'event')} from this line on{then} "
            f"{'comes' if count == 1 else 'come'} after the last digest (line {last}), but "
            "every write of a tapelog writer ends with a digest: the digest that closed "
            f"{it} was removed, or lines were added by another program (or, rarely, a crash "
            f"cut a long write); look at {it}, then resume the session with "
            f"--accept-undigested to keep {it} under a new digest",
            line=line,
        ),
    )


def _problem(event: Event, message: str) -> Problem:
    line = event.seq + 2
    text = f"line {line}: seq {event.seq}: {message}"
    return Problem(line=line, seq=event.seq, error=CorruptLogError(text, line=line))


def _left_unanswered(session: Session) -> list[Problem]:
    """The log ends with tool calls of an assistant message that have no result:
    the next request would be refused, unless repair on resume answers them, or
    the turn handed them to a client whose next request brings their results:
    the rules name the logged calls whose step ended so
    (:meth:`tapelog.log._rules.LogRules.handed_over`), and a log of an older proxy,
    which logged no ``tool/call``, ended such a turn ``tool_calls``."""
    asked = session.rules.ledger.asked()
    if not asked:
        return []
    handed = session.rules.handed_over()
    last_end = next((e for e in reversed(session.events) if e.type == "turn/end"), None)
    handed_seq = (
        last_end.seq
        if last_end is not None and last_end.data["reason"]["kind"] == "tool_calls"
        else -1
    )
    closing = {call.call_id for call in plan_repair(session).calls}
    left = [
        call
        for call in asked
        if call.call_id not in closing
        and call.call_id not in handed
        and not (call.asked_at or 0) < handed_seq
    ]
    if not left:
        return []
    listed = ", ".join(f"{call.call_id} (seq {call.asked_at})" for call in left)
    message = (
        f"the log ends here, and the next request would hold tool calls without their "
        f"results ({listed}): a provider refuses such a request, and resuming does not "
        "answer them (only the calls of a step left open are); results were removed, or "
        "the log was written by hand"
    )
    return [_problem(session.events[-1], message)]


def _walk(session: Session) -> tuple[int | None, Problem | None]:
    """The requests the log says were sent, walked as every audit walks them (so a
    log that verifies can be audited); or the problem that stops the walk."""
    # The walk visits each event once (it looks ahead only past a one-shot call
    # inside an open step, which is rare): no list of made events is needed.
    try:
        walked = walk_requests(session, one_shots=True)
        return sum(1 for request in walked if request.kind == "loop"), None
    except LogError as exc:
        seq = exc.seq if exc.seq is not None else 0
        return None, Problem(line=seq + 2, seq=seq, error=CorruptLogError(str(exc), line=seq + 2))
