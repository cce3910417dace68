"""The rebuild, the walk's rows and its readings (and its sent-step fold, which
serve's sessions list feeds), for the checker, the audit and the export
(internal: docs/architecture.md; users take them from ``tapelog.audit``).
"""

from tapelog.request._rebuild import RebuiltRequest, rebuild_request_at, rebuild_requests
from tapelog.request._request import compaction_inputs
from tapelog.request._step import HEADER_TYPES, StepFold
from tapelog.request._walk import (
    HeaderChange,
    RequestWalker,
    WalkedRequest,
    reading_seq,
    request_fields,
)

__all__ = [
    "HEADER_TYPES",
    "HeaderChange",
    "RebuiltRequest",
    "RequestWalker",
    "StepFold",
    "WalkedRequest",
    "compaction_inputs",
    "reading_seq",
    "rebuild_request_at",
    "rebuild_requests",
    "request_fields",
]
