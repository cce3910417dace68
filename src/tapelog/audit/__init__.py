"""The audit path: rebuild requests from a log with the live loop's own code.

The rebuild itself lives below the agent and the audit, in :mod:`tapelog.request`
(and the checker in :mod:`tapelog.checker`); it is re-exported here, next to the
cache report, the request diff and the HTML report built on it. The report's
views (``report_parts``, ``Timeline``, ...), which ``tapelog serve`` renders
its session pages with, are in :mod:`tapelog.audit._api`.
"""

from tapelog.audit._cache_report import CacheReport, cache_report
from tapelog.audit._diff import RequestDiff, request_diff
from tapelog.audit._report_html import render_report, report_html
from tapelog.checker import check_request
from tapelog.llm import encode_request
from tapelog.request._api import RebuiltRequest, rebuild_request_at, rebuild_requests

__all__ = [
    "CacheReport",
    "RebuiltRequest",
    "RequestDiff",
    "cache_report",
    "check_request",
    "encode_request",
    "rebuild_request_at",
    "rebuild_requests",
    "render_report",
    "report_html",
    "request_diff",
]
