"""Verification, raw session reads and id checks for the CLI, the proxy and the live
view, and the types of the port's readers of running sessions (``follow``,
``summaries``) that serve names, and the conversation index the proxy keeps in the
store (``PointRecord``) (internal: docs/architecture.md).
"""

from tapelog.store._families import in_families
from tapelog.store._ids import validate_session_id
from tapelog.store._jsonl_read import read_session_bytes, read_session_file
from tapelog.store._points import PointRecord
from tapelog.store._summaries import Cursor, Folded
from tapelog.store._verify import VerifyReport, verify_jsonl

__all__ = [
    "Cursor",
    "Folded",
    "PointRecord",
    "VerifyReport",
    "in_families",
    "read_session_bytes",
    "read_session_file",
    "validate_session_id",
    "verify_jsonl",
]
