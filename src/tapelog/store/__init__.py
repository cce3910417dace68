"""Session stores: where logs live between processes.

``SessionStore`` is the backend contract (``create``, ``open``, ``load``,
``session_bytes``, ``exists``, ``list``); ``JsonlStore`` is the embedded
default, one JSONL file per session, and ``PostgresStore`` keeps sessions in a
database many machines share. The conformance suite in ``tests/store/conformance.py`` holds
every backend to the same behaviour.
"""

from tapelog.store._base import LoadedSession, SessionStore, SessionSummary, SessionWriter
from tapelog.store._jsonl import JsonlStore
from tapelog.store._postgres import PostgresStore
from tapelog.store._reserve import Reservation

__all__ = [
    "JsonlStore",
    "LoadedSession",
    "PostgresStore",
    "Reservation",
    "SessionStore",
    "SessionSummary",
    "SessionWriter",
]
