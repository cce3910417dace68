"""The store package's internal API: what other tapelog packages use of it, users do not.

Users import the public names from :mod:`tapelog.store` (docs/api.md). A package
that may import the store layer takes these from here, the one private module of
the package it may import (docs/architecture.md, tests/test_layout.py).
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
