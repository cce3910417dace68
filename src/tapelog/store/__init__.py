"""Session stores: where logs live between processes.

``SessionStore`` is the backend contract (``create``, ``reserve``, ``open``, ``load``,
``session_bytes``, ``exists``, ``list``, and for readers of running sessions
``follow``, ``active`` and the incremental ``summaries``); ``JsonlStore`` is the embedded
default, one JSONL file per session, and ``PostgresStore`` keeps sessions in a
database many machines share. The conformance suite in ``tests/store/conformance.py`` holds
every backend to the same behaviour.
"""

from tapelog.store._base import (
    Digest,
    LoadedSession,
    SessionStore,
    SessionSummary,
    SessionWriter,
)
from tapelog.store._follow import Follower
from tapelog.store._format import JsonlScan, Problem, header_line, replay_events, scan_jsonl
from tapelog.store._ids import MAX_SESSION_ID_LENGTH, validate_session_id
from tapelog.store._jsonl import JsonlStore, JsonlWriter, read_session_bytes, read_session_file
from tapelog.store._postgres import PostgresStore
from tapelog.store._reserve import Reservation
from tapelog.store._summaries import Cursor, EventFold, Folded
from tapelog.store._verify import LogStats, VerifyReport, verify_jsonl

__all__ = [
    "MAX_SESSION_ID_LENGTH",
    "Cursor",
    "Digest",
    "EventFold",
    "Folded",
    "Follower",
    "JsonlScan",
    "JsonlStore",
    "JsonlWriter",
    "LoadedSession",
    "LogStats",
    "PostgresStore",
    "Problem",
    "Reservation",
    "SessionStore",
    "SessionSummary",
    "SessionWriter",
    "VerifyReport",
    "header_line",
    "read_session_bytes",
    "read_session_file",
    "replay_events",
    "scan_jsonl",
    "validate_session_id",
    "verify_jsonl",
]
