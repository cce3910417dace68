"""What the layers above the log share of it and users do not: the trusted and faithful
freezes, the folds, the session's building blocks (docs/architecture.md, "Public and
internal names"). The root package publishes the log's user-facing types from here.
"""

from tapelog.log._bulk import replay_decoded
from tapelog.log._canonical import decode_raw, encode_sorted_trusted, encode_str, encode_trusted
from tapelog.log._events import (
    SESSION_FORMAT_VERSION,
    Event,
    chunk_kind,
    event_from_json,
    event_from_line,
    item_from_line,
)
from tapelog.log._fold import History, LogFold
from tapelog.log._freeze import (
    FrozenDict,
    FrozenList,
    concat_frozen,
    freeze,
    freeze_faithful,
    freeze_trusted,
    thaw,
)
from tapelog.log._gc import paused_gc
from tapelog.log._header import (
    MODEL_HEADERS,
    EpochHeader,
    LlmCallConfig,
    apply_header_delta,
    canonical_header,
    diff_header,
    fold_header_event,
    fold_request_header,
    header_from_json,
    system_lines,
)
from tapelog.log._pairing import OpenCall, ToolLedger, unanswered_tool_calls
from tapelog.log._peek import iter_event_runs, peek_data
from tapelog.log._projection import derive_event_message
from tapelog.log._recorder import HeaderRecorder
from tapelog.log._redact import REDACTED, has_secrets, scoped_secrets, secret_prefix_length
from tapelog.log._repair import answer_open_calls, plan_repair, repair_interrupted
from tapelog.log._secret_shape import looks_like_secret, names_a_secret
from tapelog.log._session import RuleBreaks, Session, replay_scan
from tapelog.log._session_info import SessionEvents, SessionInfo, new_session_id

__all__ = [
    "MODEL_HEADERS",
    "REDACTED",
    "SESSION_FORMAT_VERSION",
    "EpochHeader",
    "Event",
    "FrozenDict",
    "FrozenList",
    "HeaderRecorder",
    "History",
    "LlmCallConfig",
    "LogFold",
    "OpenCall",
    "RuleBreaks",
    "Session",
    "SessionEvents",
    "SessionInfo",
    "ToolLedger",
    "answer_open_calls",
    "apply_header_delta",
    "canonical_header",
    "chunk_kind",
    "concat_frozen",
    "decode_raw",
    "derive_event_message",
    "diff_header",
    "encode_sorted_trusted",
    "encode_str",
    "encode_trusted",
    "event_from_json",
    "event_from_line",
    "fold_header_event",
    "fold_request_header",
    "freeze",
    "freeze_faithful",
    "freeze_trusted",
    "has_secrets",
    "header_from_json",
    "item_from_line",
    "iter_event_runs",
    "looks_like_secret",
    "names_a_secret",
    "new_session_id",
    "paused_gc",
    "peek_data",
    "plan_repair",
    "repair_interrupted",
    "replay_decoded",
    "replay_scan",
    "scoped_secrets",
    "secret_prefix_length",
    "system_lines",
    "thaw",
    "unanswered_tool_calls",
]
