"""The cache audit kept beside its log: derived, rebuildable, never the truth.

``tapelog cache`` and ``tapelog report`` keep the audit they computed as a
checkpoint: ``<session>.audit`` beside a JSONL session file (atomically; a
directory it cannot write to just means no checkpoint), a row of the
``audit_checkpoints`` table on PostgreSQL. It names the log bytes it covers
(their length and SHA-256: a PostgreSQL session's bytes are its JSONL form,
``session_bytes``) and how they were read (the load's warnings name the
file), and holds the rows, those warnings, the byte length and SHA-256 of
the last :data:`BODIES_KEPT` request bodies (what a server's first view of
the session shows: encoding and hashing them is most of building that page),
and the audit's state after its last finished step (``_audit_state``). Then,
for the log bytes at hand:

* they are exactly the covered bytes, read the same way: the audit is the
  rows (``tapelog cache`` does not even load the log: a log that validated once
  validates again byte for byte, and the audit is a pure function of it);
* they extend the covered bytes (the log grew, append-only): the log is loaded,
  and the audit resumes from the state, over the requests after it only (the
  last request covered is rendered once more); the result is what an audit from
  scratch gives, and the checkpoint is rewritten;
* anything else (a changed or truncated log, a checkpoint edited, damaged or
  written by another format or tapelog version): it is ignored, the log is
  audited from the start, and the checkpoint is rewritten.

Each section of the file carries its SHA-256 in the first line, so damage is
noticed; it is not a signature: whoever can write the store can write the log
too. Deleting a checkpoint changes nothing but speed (docs/format.md).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from tapelog._version import __version__
from tapelog.audit._audit_state import AuditState
from tapelog.audit._body_digests import BodyDigest, WirePieces, body_digests
from tapelog.audit._cache_cause import CacheCause
from tapelog.audit._cache_report import (
    CacheReport,
    RequestCache,
    audit_requests,
    report_of_rows,
    request_cache_of,
)
from tapelog.audit._segments import SegmentRenderer
from tapelog.log import decode, encode
from tapelog.log._api import Session, encode_trusted, paused_gc
from tapelog.request import walk_requests
from tapelog.request._api import WalkedRequest

__all__ = [
    "BODIES_KEPT",
    "Checkpoint",
    "ResumePoint",
    "checkpoint_blob",
    "checkpoint_path",
    "kept_bodies",
    "parse_checkpoint",
    "read_checkpoint_file",
    "resumed_audit",
    "write_checkpoint_file",
]

_FORMAT: Final = "tapelog/cache-audit"
_VERSION: Final = 4
BODIES_KEPT: Final = 50
"""How many of the last requests' body digests a checkpoint keeps: at least
``tapelog serve``'s window (``tapelog.serve._session_page.WINDOW``), so the
last window's are all there."""
_FILE_MODE: Final = 0o600


def checkpoint_path(log: Path) -> Path:
    """Where the checkpoint of the log file ``log`` lives: ``<session>.audit`` beside it."""
    return log.with_suffix(".audit")


def _sha256(data: bytes | memoryview) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A checkpoint read back (:func:`parse_checkpoint`): what it covers and holds."""

    size: int
    """The byte length of the log it covers."""
    sha256: str
    """The SHA-256 of those bytes."""
    read_as: str
    """How they were read (the load's warnings name it)."""
    events: int
    """How many events those bytes hold."""
    session: str | None
    warnings: tuple[str, ...]
    rows: tuple[RequestCache, ...]
    bodies: Mapping[int, BodyDigest]
    """The last requests' body digests, by request index (:func:`kept_bodies`)."""
    state_line: bytes
    state_sha256: str

    def covers(self, data: bytes, read_as: str | None, *, sha256: str | None = None) -> bool:
        """Whether it is the audit of exactly ``data`` read as ``read_as``
        (``None``: read any way, for a caller that has the load's own warnings).
        ``sha256``: the hex SHA-256 of ``data``, when the caller hashed it already."""
        return (
            read_as in (None, self.read_as)
            and self.size == len(data)
            and self.sha256 == (sha256 or _sha256(data))
        )

    def extended_by(self, data: bytes) -> bool:
        """Whether ``data`` starts with the bytes it covers (the log grew or is the same)."""
        return len(data) >= self.size and self.sha256 == _sha256(memoryview(data)[: self.size])

    def report(self) -> CacheReport:
        return report_of_rows(self.session, self.rows)

    def resume_point(self, data: bytes) -> ResumePoint | None:
        """What resumes the audit of the log bytes ``data``: ``None`` unless they
        extend the bytes covered and the state section is intact."""
        if not self.extended_by(data):
            return None
        state = self.state()
        return None if state is None else (state, self.rows)

    def bodies_through(self, requests: int) -> dict[int, BodyDigest]:
        """Its body digests of requests ``1..requests``: for a log that grew,
        those its resume point covers (the requests both logs share)."""
        return {i: d for i, d in self.bodies.items() if i <= requests}

    def state(self) -> AuditState | None:
        """What resumes the audit (``None`` when that section is damaged)."""
        try:
            if _sha256(self.state_line) != self.state_sha256:
                return None
            state = AuditState.from_json(decode(self.state_line))
        except Exception:  # untrusted input of any shape: rebuilt
            return None
        return state if state.requests <= len(self.rows) else None


def _row_json(row: RequestCache) -> dict[str, Any]:
    return {**row.to_json(), "usage_logged": row.usage_logged}


def _row(obj: Mapping[str, Any]) -> RequestCache:
    fields = dict(obj)
    fields.pop("cross_session_tokens", None)  # derived from the counts
    verdict = fields.pop("provider_verdict", None)  # the provider's own, when it gave one
    fields["provider_verdict"] = None if verdict is None else verdict["verdict"]
    fields["provider_agrees"] = None if verdict is None else verdict["agrees"]
    fields["causes"] = tuple(
        CacheCause(kind=c["kind"], seqs=tuple(c["seqs"]), detail=c["detail"])
        for c in fields["causes"]
    )
    return request_cache_of(fields)


def kept_bodies(
    walked: Sequence[WalkedRequest],
    known: Mapping[int, BodyDigest],
    pieces: WirePieces | None = None,
) -> dict[int, BodyDigest]:
    """The body digests of the last :data:`BODIES_KEPT` of ``walked`` (a whole
    walk of the log), taken from ``known`` (a checkpoint's, for requests its
    log and this one share) where it has them, the others encoded (from the
    audit's wire ``pieces`` of their nodes, where given)."""
    last = walked[-BODIES_KEPT:]
    out = {w.index: known[w.index] for w in last if w.index in known}
    out.update(body_digests([w for w in last if w.index not in out], pieces))
    return dict(sorted(out.items()))


def checkpoint_blob(
    data: bytes,
    read_as: str,
    events: int,
    report: CacheReport,
    warnings: Sequence[str],
    state: AuditState,
    bodies: Mapping[int, BodyDigest],
) -> bytes:
    """The checkpoint of the audit ``report`` of the log bytes ``data`` (``events``
    events, read as ``read_as``, whose load gave ``warnings``), resumable from
    ``state``, with the body digests ``bodies`` (:func:`kept_bodies`).

    Three lines: what it covers with each section's SHA-256, the rows, the
    warnings and the body digests, the state (read only to resume: the largest part)."""
    with paused_gc():  # many small containers made and dropped beside a loaded log
        # The rows and the state are the audit's own values (log data, ints and
        # strings): encoded without the validating walk, the same bytes.
        rows = encode_trusted(
            {
                "session": report.session,
                "warnings": list(warnings),
                "rows": [_row_json(r) for r in report.requests],
                "bodies": [[index, size, sha] for index, (size, sha) in bodies.items()],
            }
        )
        state_line = encode_trusted(state.to_json())
        head = {
            "format": _FORMAT,
            "version": _VERSION,
            "tapelog": __version__,
            "log": {"bytes": len(data), "sha256": _sha256(data), "read_as": read_as},
            "events": events,
            "rows_sha256": _sha256(rows),
            "state_sha256": _sha256(state_line),
        }
        return b"\n".join((encode(head), rows, state_line)) + b"\n"


def parse_checkpoint(blob: bytes) -> Checkpoint | None:
    """The checkpoint ``blob`` holds; ``None`` when it is not one this version
    wrote or a section does not match its digest (it is then rebuilt)."""
    try:
        head_line, rows_line, state_line, end = blob.split(b"\n")
        head = decode(head_line)
        if not (
            end == b""
            and isinstance(head, dict)
            and head.get("format") == _FORMAT
            and head.get("version") == _VERSION
            and head.get("tapelog") == __version__
            and head.get("rows_sha256") == _sha256(rows_line)
        ):
            return None
        body = decode(rows_line)
        log, events, warnings = head["log"], head["events"], body["warnings"]
        if not (
            isinstance(log["bytes"], int)
            and isinstance(log["sha256"], str)
            and isinstance(log["read_as"], str)
            and isinstance(events, int)
            and isinstance(head["state_sha256"], str)
            and all(isinstance(w, str) for w in warnings)
        ):
            return None
        return Checkpoint(
            size=log["bytes"],
            sha256=log["sha256"],
            read_as=log["read_as"],
            events=events,
            session=body["session"],
            warnings=tuple(warnings),
            rows=tuple(_row(r) for r in body["rows"]),
            bodies=_bodies(body["bodies"]),
            state_line=state_line,
            state_sha256=head["state_sha256"],
        )
    except Exception:  # unreadable, malformed, or from another shape: rebuilt
        return None


def _bodies(obj: Any) -> dict[int, BodyDigest]:
    """The body digests a checkpoint holds; ``ValueError`` on anything else."""
    out: dict[int, BodyDigest] = {}
    for entry in obj:
        index, size, sha = entry
        if not (
            type(index) is int
            and type(size) is int
            and index >= 1
            and size >= 0
            and isinstance(sha, str)
            and len(sha) == 64
            and all(c in "0123456789abcdef" for c in sha)
        ):
            raise ValueError("body digest")
        out[index] = (size, sha)
    return out


ResumePoint = tuple[AuditState, Sequence[RequestCache]]
"""An audit's state after its first ``n`` requests, and (at least) their rows."""


def resumed_audit(
    session: Session,
    resume: ResumePoint | None,
    *,
    walked: Iterable[WalkedRequest] | None = None,
    renderer: SegmentRenderer | None = None,
) -> tuple[CacheReport, AuditState]:
    """The cache audit of ``session``, resumed from ``resume`` (a checkpoint's
    :meth:`~Checkpoint.resume_point` for a prefix of this log) when given; and
    the state a new checkpoint keeps: after the last request that began before
    the log's last ``step/start`` (that step may still grow). ``renderer``:
    see :func:`audit_requests`."""
    requests = walk_requests(session) if walked is None else walked
    rows, state = audit_requests(
        requests, resume=resume, keep_before=_last_step(session), renderer=renderer
    )
    assert state is not None  # kept unless told not to
    return report_of_rows(session.id, rows), state


def _last_step(session: Session) -> int | None:
    """The seq of the log's last ``step/start`` (``None``: it has none)."""
    events = session.events
    for seq in range(len(events) - 1, -1, -1):
        if events[seq].type == "step/start":
            return seq
    return None


def read_checkpoint_file(path: Path) -> Checkpoint | None:
    """The checkpoint at ``path`` (``None``: none, or none this version can use)."""
    try:
        blob = path.read_bytes()
    except OSError:
        return None
    return parse_checkpoint(blob)


def write_checkpoint_file(path: Path, blob: bytes) -> None:
    """Keep ``blob`` at ``path``, atomically; a failure to write is no error
    (the checkpoint only saves time)."""
    temp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        # Owner-only and never through a link, as the session file it derives from.
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, _FILE_MODE)
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(blob)
        os.replace(temp, path)
    except OSError:
        with contextlib.suppress(OSError):
            temp.unlink()
