"""The cache audit of a session, from its checkpoint where one fits (tapelog.audit._checkpoint).

A session in one JSONL file keeps its checkpoint beside the file; a session
in PostgreSQL keeps it in the store's ``audit_checkpoints`` table. ``tapelog
cache`` needs only the audit: a checkpoint of exactly the log's bytes saves
loading the log at all (its warnings are printed from the checkpoint); one of
a shorter log (it grew since) saves auditing what it covers. ``tapelog
report`` needs the session too: it loads it and takes what it can of the
audit from the checkpoint. Both write the checkpoint of what they audited.
"""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from tapelog.audit import CacheReport, cache_report
from tapelog.audit._api import (
    BODIES_KEPT,
    Checkpoint,
    SegmentRenderer,
    checkpoint_blob,
    checkpoint_path,
    kept_bodies,
    parse_checkpoint,
    read_checkpoint_file,
    resumed_audit,
    write_checkpoint_file,
)
from tapelog.cli._store_cmds import (
    _resolve,
    echo_warnings,
    load_target,
    load_target_bytes,
    load_warnings,
    target_file,
)
from tapelog.cli._stores import open_store
from tapelog.log._api import Session
from tapelog.request import walk_requests
from tapelog.request._api import WalkedRequest
from tapelog.store import LoadedSession, PostgresStore

__all__ = ["checkpointed_audit", "loaded_and_audited"]


@dataclass(frozen=True, slots=True)
class _Located:
    """A session's log bytes, how they were read, and where its checkpoint is kept."""

    data: bytes
    read_as: str
    load: Callable[[], LoadedSession]
    """The session, loaded from exactly :attr:`data`."""
    read: Callable[[], Checkpoint | None]
    write: Callable[[bytes, int], None]
    """Keep a checkpoint blob covering :attr:`data` (its event count given)."""


def _located(target: str, store: str | None) -> _Located | None:
    """Where the session ``target`` keeps its checkpoint (``None``: a store that keeps none)."""
    found = target_file(target, store)
    if found is not None:
        path, data, read_as = found
        where = checkpoint_path(path)
        return _Located(
            data,
            read_as,
            lambda: load_target_bytes(target, store, data),
            lambda: read_checkpoint_file(where),
            lambda blob, _: write_checkpoint_file(where, blob),
        )
    opened = open_store(store)
    session_id = _resolve(target)[1]
    if not isinstance(opened, PostgresStore) or session_id is None:
        return None
    pg, sid = opened, session_id
    data = pg.session_bytes(sid)

    def read() -> Checkpoint | None:
        blob = pg.audit_checkpoint(sid)
        return None if blob is None else parse_checkpoint(blob)

    def write(blob: bytes, events: int) -> None:
        digest = hashlib.sha256(data).hexdigest()
        pg.keep_audit_checkpoint(sid, blob, events=events, size=len(data), sha256=digest)

    return _Located(data, f"postgres:{pg!r}:{sid}", lambda: pg.load_bytes(sid, data), read, write)


def _keeping(
    requests: Iterable[WalkedRequest], last: deque[WalkedRequest]
) -> Iterator[WalkedRequest]:
    """``requests``, each also appended to ``last`` as it is yielded."""
    for request in requests:
        last.append(request)
        yield request


def _audited(
    located: _Located,
    loaded: LoadedSession,
    kept: Checkpoint | None,
    warnings: Sequence[str],
    walked: Sequence[WalkedRequest] | None = None,
) -> CacheReport:
    """The audit, resumed from ``kept`` where it covers a prefix of the log
    (``walked``: the session's requests, when the caller walked them); checkpointed
    with the last requests' body digests (what a server's first view shows)."""
    session = loaded.session
    resume = None if kept is None else kept.resume_point(located.data)
    last: deque[WalkedRequest] = deque(maxlen=BODIES_KEPT)  # not the whole walk in memory
    requests = walk_requests(session) if walked is None else walked
    renderer = SegmentRenderer()  # its nodes' wire pieces make the bodies too
    report, state = resumed_audit(
        session, resume, walked=_keeping(requests, last), renderer=renderer
    )
    known = {} if kept is None or resume is None else kept.bodies_through(resume[0].requests)
    bodies = kept_bodies(list(last), known, renderer.wire_pieces)
    blob = checkpoint_blob(
        located.data, located.read_as, len(session), report, warnings, state, bodies
    )
    located.write(blob, len(session))
    return report


def checkpointed_audit(target: str, store: str | None) -> CacheReport:
    """The cache audit of a session, its load's warnings on stderr: from its
    checkpoint when that covers exactly the log's bytes (read the same way),
    resumed from it when the log grew since, else computed; checkpointed."""
    located = _located(target, store)
    if located is None:
        return cache_report(load_target(target, store))
    kept = located.read()
    if kept is not None and kept.covers(located.data, located.read_as):
        report, warnings = kept.report(), kept.warnings
    else:
        loaded = located.load()
        warnings = load_warnings(loaded)
        report = _audited(located, loaded, kept, warnings)
    echo_warnings(warnings)
    return report


def loaded_and_audited(
    target: str, store: str | None
) -> tuple[Session, list[WalkedRequest], CacheReport]:
    """The session (its load's warnings on stderr), its requests, and its
    audit: from its checkpoint when that covers the log's bytes, resumed from
    it when the log grew since, else computed; checkpointed where the store
    keeps checkpoints. One walk of the log serves the audit and the caller."""
    located = _located(target, store)
    if located is None:
        session = load_target(target, store)
        walked = list(walk_requests(session))
        return session, walked, cache_report(session, walked=walked)
    loaded = located.load()
    warnings = load_warnings(loaded)
    echo_warnings(warnings)
    walked = list(walk_requests(loaded.session))
    kept = located.read()
    if kept is not None and kept.covers(located.data, None):
        return loaded.session, walked, kept.report()
    return loaded.session, walked, _audited(located, loaded, kept, warnings, walked)
