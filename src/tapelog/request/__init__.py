"""From log to request: the neutral request, how a log position becomes one, and the walk.

Domain code between the log and the wires (docs/architecture.md): the live
loop builds each request with :func:`build_request` (and each compaction
summary with :func:`summary_request`); the invariant checker, ``tapelog
requests`` and every audit rebuild them with :func:`walk_requests` /
:func:`rebuild_requests` over the log's own fold. One path from log to request.
"""

from tapelog.request._rebuild import RebuiltRequest, rebuild_request_at, rebuild_requests
from tapelog.request._request import (
    LlmRequest,
    build_request,
    compaction_inputs,
    instruction_message,
    summary_request,
)
from tapelog.request._step import HEADER_TYPES, StepFold
from tapelog.request._walk import (
    HeaderChange,
    WalkedRequest,
    reading_seq,
    request_fields,
    trusted_events,
    walk_requests,
)

__all__ = [
    "HEADER_TYPES",
    "HeaderChange",
    "LlmRequest",
    "RebuiltRequest",
    "StepFold",
    "WalkedRequest",
    "build_request",
    "compaction_inputs",
    "instruction_message",
    "reading_seq",
    "rebuild_request_at",
    "rebuild_requests",
    "request_fields",
    "summary_request",
    "trusted_events",
    "walk_requests",
]
