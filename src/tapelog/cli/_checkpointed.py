"""The cache audit of a session, from its checkpoint when one matches (tapelog.audit._checkpoint).

``tapelog cache`` needs only the audit: a matching checkpoint saves loading
the log at all (its warnings are printed from the checkpoint). ``tapelog
report`` needs the session too: it loads it and takes only the audit from the
checkpoint. Both compute and write the checkpoint when none matches.
"""

from __future__ import annotations

from tapelog.audit import CacheReport, cache_report
from tapelog.audit._api import checkpoint_path, read_checkpoint, write_checkpoint
from tapelog.cli._store_cmds import (
    echo_warnings,
    load_target,
    load_target_bytes,
    load_warnings,
    target_file,
)
from tapelog.log._api import Session

__all__ = ["checkpointed_audit", "loaded_and_audited"]


def checkpointed_audit(target: str, store: str | None) -> CacheReport:
    """The cache audit of a session, its load's warnings on stderr: from the
    checkpoint beside the session's JSONL file when it matches the file's
    bytes (and path), else computed and checkpointed."""
    found = target_file(target, store)
    if found is None:
        return cache_report(load_target(target, store))
    path, data, read_as = found
    where = checkpoint_path(path)
    kept = read_checkpoint(where, data, read_as)
    if kept is not None:
        report, warnings = kept
    else:
        loaded = load_target_bytes(target, store, data)
        warnings = load_warnings(loaded)
        report = cache_report(loaded.session)
        write_checkpoint(where, data, read_as, report, warnings)
    echo_warnings(warnings)
    return report


def loaded_and_audited(target: str, store: str | None) -> tuple[Session, CacheReport | None]:
    """The session (its load's warnings on stderr) and its audit: from a
    matching checkpoint, else computed and checkpointed (``None`` for a store
    that keeps no checkpoint: the caller computes it with what it walks)."""
    found = target_file(target, store)
    if found is None:
        return load_target(target, store), None
    path, data, read_as = found
    loaded = load_target_bytes(target, store, data)
    echo_warnings(load_warnings(loaded))
    kept = read_checkpoint(checkpoint_path(path), data, None)
    if kept is not None:
        return loaded.session, kept[0]
    report = cache_report(loaded.session)
    write_checkpoint(checkpoint_path(path), data, read_as, report, load_warnings(loaded))
    return loaded.session, report
