"""The audit path: rebuild loop requests from a log with the live loop's own code."""

from tapelog.audit._cache_report import (
    CacheCause,
    CacheReport,
    CacheTotals,
    RequestCache,
    cache_report,
)
from tapelog.audit._checker import check_enabled, check_request
from tapelog.audit._diff import HeaderDiff, MessagesDiff, RequestDiff, header_diff, request_diff
from tapelog.audit._rebuild import (
    RebuiltRequest,
    build_request,
    encode_request,
    rebuild_request_at,
    rebuild_requests,
)
from tapelog.audit._report_html import render_report
from tapelog.audit._report_views import header_change

__all__ = [
    "CacheCause",
    "CacheReport",
    "CacheTotals",
    "HeaderDiff",
    "MessagesDiff",
    "RebuiltRequest",
    "RequestCache",
    "RequestDiff",
    "build_request",
    "cache_report",
    "check_enabled",
    "check_request",
    "encode_request",
    "header_change",
    "header_diff",
    "rebuild_request_at",
    "rebuild_requests",
    "render_report",
    "request_diff",
]
