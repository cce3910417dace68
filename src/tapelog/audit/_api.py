"""The audit package's internal API: what other tapelog packages use of it, users do not.

Users import the public names from :mod:`tapelog.audit` (docs/api.md). A package
that may import the audit layer takes these from here, the one private module of
the package it may import (docs/architecture.md, tests/test_layout.py).
"""

from tapelog.audit._cache_report import CacheTotals, RequestCache
from tapelog.audit._diff import HeaderDiff
from tapelog.audit._report_html import (
    ReportParts,
    ReportWindow,
    report_assets,
    report_parts,
    report_windows,
)
from tapelog.audit._report_links import ReportLinks
from tapelog.audit._report_timeline import Timeline
from tapelog.audit._report_views import header_change, message_html
from tapelog.audit._sentences import edit_sentence, header_sentence

__all__ = [
    "CacheTotals",
    "HeaderDiff",
    "ReportLinks",
    "ReportParts",
    "ReportWindow",
    "RequestCache",
    "Timeline",
    "edit_sentence",
    "header_change",
    "header_sentence",
    "message_html",
    "report_assets",
    "report_parts",
    "report_windows",
]
