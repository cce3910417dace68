"""A finished cache audit kept beside its log: derived, rebuildable, never the truth.

``tapelog cache`` on a session stored as a JSONL file writes the audit it
computed to ``<session>.audit`` next to the file (atomically; a directory it
cannot write to just means no checkpoint). The next run reads the log's bytes,
and uses the checkpoint only if it names exactly those bytes (their length and
SHA-256) read the same way (the same file path, as a file or from a store: the
load's warnings name it), this format, and this tapelog version; otherwise (a log that grew or
changed, a checkpoint edited, truncated or written by another version) it is
ignored, the log is loaded and audited as without it, and the file is rewritten.
A matching checkpoint saves the load and the audit: a log that validated once
validates again byte for byte, and the audit is a pure function of the log.
``tapelog report`` (which loads the log for its timeline anyway) and the first
view of a session in ``tapelog serve`` take the audit from a matching
checkpoint too; ``report`` writes one when there was none, ``serve`` only reads.

The checkpoint holds the rows (totals are recomputed from them), the warnings
the load gave (a run from the checkpoint prints them as the load would have),
and a SHA-256 of both, so damage to the file is noticed; it is not a signature:
whoever can write the store directory can write the log too. It covers the whole log:
an appended log is audited again from the start (a checkpoint inside the walk,
resumed from, is not built yet: issue 20).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from tapelog._version import __version__
from tapelog.audit._cache_cause import CacheCause
from tapelog.audit._cache_report import CacheReport, RequestCache, report_of_rows
from tapelog.log import decode, encode

__all__ = ["checkpoint_path", "read_checkpoint", "write_checkpoint"]

_FORMAT: Final = "tapelog/cache-audit"
_VERSION: Final = 1
_FILE_MODE: Final = 0o600


def checkpoint_path(log: Path) -> Path:
    """Where the checkpoint of the log file ``log`` lives: ``<session>.audit`` beside it."""
    return log.with_suffix(".audit")


def _log_key(data: bytes, read_as: str) -> dict[str, Any]:
    """The bytes audited, and how the log was named (its warnings name it so)."""
    return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(), "read_as": read_as}


def _row_json(row: RequestCache) -> dict[str, Any]:
    return {**row.to_json(), "usage_logged": row.usage_logged}


def _row(obj: Mapping[str, Any]) -> RequestCache:
    fields = dict(obj)
    fields.pop("cross_session_tokens", None)  # derived from the counts
    verdict = fields.pop("provider_verdict", None)  # the provider's own, when it gave one
    if verdict is not None:
        fields["provider_verdict"] = verdict["verdict"]
        fields["provider_agrees"] = verdict["agrees"]
    causes = tuple(
        CacheCause(kind=c["kind"], seqs=tuple(c["seqs"]), detail=c["detail"])
        for c in fields.pop("causes")
    )
    return RequestCache(**fields, causes=causes)


def read_checkpoint(
    path: Path, data: bytes, read_as: str | None
) -> tuple[CacheReport, tuple[str, ...]] | None:
    """The audit the checkpoint at ``path`` holds for the log bytes ``data``,
    with the warnings their load gave; ``None`` when there is none or it does
    not match (see the module docstring). ``read_as`` (a file or store path)
    must match too when the warnings are to be printed from the checkpoint;
    ``None`` when the caller loads the log and has its own."""
    try:
        obj = decode(path.read_bytes())
        if not (
            isinstance(obj, dict)
            and obj.get("format") == _FORMAT
            and obj.get("version") == _VERSION
            and obj.get("tapelog") == __version__
        ):
            return None
        log: Any = obj.get("log")
        key = _log_key(data, log["read_as"] if read_as is None else read_as)
        if log != key:
            return None
        rows, warnings = obj["rows"], obj["warnings"]
        if obj.get("sha256") != _content_digest(obj["session"], rows, warnings):
            return None
        if not all(isinstance(w, str) for w in warnings):
            return None
        return report_of_rows(obj["session"], [_row(r) for r in rows]), tuple(warnings)
    except Exception:  # unreadable, malformed, or from another shape: rebuilt
        return None


def _content_digest(session: Any, rows: Any, warnings: Any) -> str:
    return hashlib.sha256(encode([session, rows, warnings])).hexdigest()


def write_checkpoint(
    path: Path, data: bytes, read_as: str, report: CacheReport, warnings: Sequence[str]
) -> None:
    """Keep ``report`` (the audit of the log bytes ``data``, read as ``read_as``) and the warnings
    their load gave at ``path``; a failure to write is no error (the checkpoint
    only saves time)."""
    rows = [_row_json(r) for r in report.requests]
    body = {
        "format": _FORMAT,
        "version": _VERSION,
        "tapelog": __version__,
        "log": _log_key(data, read_as),
        "session": report.session,
        "sha256": _content_digest(report.session, rows, list(warnings)),
        "warnings": list(warnings),
        "rows": rows,
    }
    temp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        # Owner-only and never through a link, as the session file it derives from.
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, _FILE_MODE)
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(encode(body))
        os.replace(temp, path)
    except OSError:
        with contextlib.suppress(OSError):
            temp.unlink()
