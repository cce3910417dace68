"""The rebuild, the walk's rows and its readings, for the checker, the audit and the
export (internal: docs/architecture.md; users take them from ``tapelog.audit``).
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
