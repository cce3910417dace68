"""The session log: events, surface, projection, request header and canonical JSON."""

from tapelog.log._canonical import decode, digest, encode, encode_str, encode_trusted
from tapelog.log._events import (
    EVENT_TYPES,
    PACKED_TYPES,
    SESSION_FORMAT_VERSION,
    SURFACE_TYPES,
    Event,
    PackedChunk,
    PackedEvent,
    chunk_kind,
    event_from_json,
)
from tapelog.log._fold import History, LogFold
from tapelog.log._freeze import (
    FrozenDict,
    FrozenList,
    JsonValue,
    concat_frozen,
    freeze,
    freeze_faithful,
    freeze_trusted,
    thaw,
)
from tapelog.log._gc import paused_gc
from tapelog.log._header import (
    EpochHeader,
    LlmCallConfig,
    apply_header_delta,
    canonical_header,
    diff_header,
    fold_header_event,
    fold_request_header,
    header_from_json,
)
from tapelog.log._pairing import OpenCall, ToolLedger, unanswered_tool_calls
from tapelog.log._projection import derive_event_message, fold_messages
from tapelog.log._recorder import HeaderRecorder
from tapelog.log._redact import (
    MIN_SECRET_LENGTH,
    REDACTED,
    forget_secrets,
    has_secrets,
    redact,
    register_secret,
    secret_prefix_length,
)
from tapelog.log._repair import RepairPlan, answer_call, plan_repair, repair_interrupted
from tapelog.log._session import (
    Session,
    SessionEvents,
    SessionInfo,
    new_session_id,
    open_turn_at,
)

__all__ = [
    "EVENT_TYPES",
    "MIN_SECRET_LENGTH",
    "PACKED_TYPES",
    "REDACTED",
    "SESSION_FORMAT_VERSION",
    "SURFACE_TYPES",
    "EpochHeader",
    "Event",
    "FrozenDict",
    "FrozenList",
    "HeaderRecorder",
    "History",
    "JsonValue",
    "LlmCallConfig",
    "LogFold",
    "OpenCall",
    "PackedChunk",
    "PackedEvent",
    "RepairPlan",
    "Session",
    "SessionEvents",
    "SessionInfo",
    "ToolLedger",
    "answer_call",
    "apply_header_delta",
    "canonical_header",
    "chunk_kind",
    "concat_frozen",
    "decode",
    "derive_event_message",
    "diff_header",
    "digest",
    "encode",
    "encode_str",
    "encode_trusted",
    "event_from_json",
    "fold_header_event",
    "fold_messages",
    "fold_request_header",
    "forget_secrets",
    "freeze",
    "freeze_faithful",
    "freeze_trusted",
    "has_secrets",
    "header_from_json",
    "new_session_id",
    "open_turn_at",
    "paused_gc",
    "plan_repair",
    "redact",
    "register_secret",
    "repair_interrupted",
    "secret_prefix_length",
    "thaw",
    "unanswered_tool_calls",
]
