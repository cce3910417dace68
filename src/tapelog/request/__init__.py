"""From log to request: the neutral request, how a log position becomes one, and the walk.

Domain code between the log and the wires (docs/architecture.md): the live
loop builds each request with :func:`build_request` (and each compaction
summary with :func:`summary_request`); the invariant checker, ``tapelog
requests`` and every audit rebuild them with :func:`walk_requests` /
:func:`rebuild_requests` (from :mod:`tapelog.audit`) over the log's own fold.
One path from log to request.
"""

from tapelog.request._request import LlmRequest, build_request, summary_request
from tapelog.request._walk import walk_requests

__all__ = [
    "LlmRequest",
    "build_request",
    "summary_request",
    "walk_requests",
]
