"""The audit path: rebuild loop requests from a log with the live loop's own code."""

from tapelog.audit._checker import check_enabled, check_request
from tapelog.audit._rebuild import (
    RebuiltRequest,
    build_request,
    encode_request,
    rebuild_request_at,
    rebuild_requests,
)

__all__ = [
    "RebuiltRequest",
    "build_request",
    "check_enabled",
    "check_request",
    "encode_request",
    "rebuild_request_at",
    "rebuild_requests",
]
