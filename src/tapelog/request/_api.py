"""The request package's internal API: what other tapelog packages use of it, users do not.

Users import the public names from :mod:`tapelog.request` (docs/api.md). A package
that may import the request layer takes these from here, the one private module of
the package it may import (docs/architecture.md, tests/test_layout.py).
"""

from tapelog.request._rebuild import RebuiltRequest, rebuild_request_at, rebuild_requests
from tapelog.request._request import compaction_inputs
from tapelog.request._walk import HeaderChange, WalkedRequest, reading_seq, request_fields

__all__ = [
    "HeaderChange",
    "RebuiltRequest",
    "WalkedRequest",
    "compaction_inputs",
    "reading_seq",
    "rebuild_request_at",
    "rebuild_requests",
    "request_fields",
]
