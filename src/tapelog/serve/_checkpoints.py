"""The cache audit checkpoint a stored session has, for the server's readers.

``tapelog cache`` and ``tapelog report`` keep one (``tapelog.audit._checkpoint``):
beside a JSONL session file, or in PostgreSQL's ``audit_checkpoints`` table.
The server reads them, never writes them: the sessions index takes a
session's totals from a checkpoint of exactly its bytes, and a session's
first view its audit (or resumes the audit from one of a shorter log).
"""

from __future__ import annotations

from tapelog.audit._api import Checkpoint, checkpoint_path, parse_checkpoint, read_checkpoint_file
from tapelog.store import JsonlStore, PostgresStore, SessionStore

__all__ = ["stored_checkpoint"]


def stored_checkpoint(store: SessionStore, session_id: str) -> Checkpoint | None:
    """The session's checkpoint (``None``: none, or a store that keeps none)."""
    if isinstance(store, JsonlStore):
        return read_checkpoint_file(checkpoint_path(store.path(session_id)))
    if isinstance(store, PostgresStore):
        blob = store.audit_checkpoint(session_id)
        return None if blob is None else parse_checkpoint(blob)
    return None
