"""The report's views and row types that ``tapelog serve``, the CLI and the export reuse
(internal: docs/architecture.md).
"""

from tapelog.audit._body_digests import BodyDigest, WirePieces
from tapelog.audit._cache_report import CacheTotals, RequestCache
from tapelog.audit._cache_watch import CacheWatch
from tapelog.audit._checkpoint import (
    BODIES_KEPT,
    Checkpoint,
    ResumePoint,
    checkpoint_blob,
    checkpoint_path,
    kept_bodies,
    parse_checkpoint,
    read_checkpoint_file,
    resumed_audit,
    write_checkpoint_file,
)
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
from tapelog.audit._segments import SegmentRenderer
from tapelog.audit._sentences import edit_sentence, header_sentence

__all__ = [
    "BODIES_KEPT",
    "BodyDigest",
    "CacheTotals",
    "CacheWatch",
    "Checkpoint",
    "HeaderDiff",
    "ReportLinks",
    "ReportParts",
    "ReportWindow",
    "RequestCache",
    "ResumePoint",
    "SegmentRenderer",
    "Timeline",
    "WirePieces",
    "checkpoint_blob",
    "checkpoint_path",
    "edit_sentence",
    "header_change",
    "header_sentence",
    "kept_bodies",
    "message_html",
    "parse_checkpoint",
    "read_checkpoint_file",
    "report_assets",
    "report_parts",
    "report_windows",
    "resumed_audit",
    "write_checkpoint_file",
]
