"""Verification, raw session reads and id checks for the CLI, the proxy and the live
view (internal: docs/architecture.md).
"""

from tapelog.store._ids import validate_session_id
from tapelog.store._jsonl import read_session_bytes, read_session_file
from tapelog.store._verify import VerifyReport, verify_jsonl

__all__ = [
    "VerifyReport",
    "read_session_bytes",
    "read_session_file",
    "validate_session_id",
    "verify_jsonl",
]
