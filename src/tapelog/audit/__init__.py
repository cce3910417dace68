"""The audit path: rebuild requests from a log with the live loop's own code.

The rebuild itself lives below the agent and the audit, in :mod:`tapelog.request`
(and the checker in :mod:`tapelog.checker`); it is re-exported here, next to the
cache report, the request diff and the HTML report built on it. The report's
views (:func:`report_parts`, :func:`report_html`, :class:`Timeline`, ...) are
public so that ``tapelog serve`` renders its session pages with them.
"""

from tapelog.audit._cache_report import (
    CacheCause,
    CacheReport,
    CacheTotals,
    RequestCache,
    cache_report,
)
from tapelog.audit._diff import HeaderDiff, MessagesDiff, RequestDiff, header_diff, request_diff
from tapelog.audit._edits import MessageChange
from tapelog.audit._history_edits import HistoryChanges, history_changes
from tapelog.audit._report_html import (
    ReportParts,
    ReportWindow,
    render_report,
    report_assets,
    report_html,
    report_parts,
    report_windows,
)
from tapelog.audit._report_links import ReportLinks
from tapelog.audit._report_timeline import Timeline
from tapelog.audit._report_views import header_change, message_html
from tapelog.audit._sentences import edit_sentence, header_sentence
from tapelog.checker import check_enabled, check_request
from tapelog.llm import encode_request
from tapelog.request import RebuiltRequest, build_request, rebuild_request_at, rebuild_requests

__all__ = [
    "CacheCause",
    "CacheReport",
    "CacheTotals",
    "HeaderDiff",
    "HistoryChanges",
    "MessageChange",
    "MessagesDiff",
    "RebuiltRequest",
    "ReportLinks",
    "ReportParts",
    "ReportWindow",
    "RequestCache",
    "RequestDiff",
    "Timeline",
    "build_request",
    "cache_report",
    "check_enabled",
    "check_request",
    "edit_sentence",
    "encode_request",
    "header_change",
    "header_diff",
    "header_sentence",
    "history_changes",
    "message_html",
    "rebuild_request_at",
    "rebuild_requests",
    "render_report",
    "report_assets",
    "report_html",
    "report_parts",
    "report_windows",
    "request_diff",
]
