"""tapelog: LLM agents whose session log is the single source of truth.

Every request the agent loop sends is a pure function of the append-only
session log. See docs/architecture.md for the data flow and docs/format.md for
the event catalog.

Importing it also wires in what the lower layers may not import themselves
(:mod:`tapelog._wiring`: the emulator's in-process transport).
"""

from tapelog import _wiring
from tapelog._errors import (
    ClientMismatchError,
    ContextOverflowError,
    CorruptLogError,
    EventError,
    ForkError,
    FormatVersionError,
    FrozenError,
    HeaderError,
    InvalidSessionIdError,
    JsonValueError,
    LogError,
    OutputError,
    ProviderError,
    ReconstructionError,
    ReentrantAppendError,
    SessionExistsError,
    SessionLockedError,
    SessionNotFoundError,
    StoreError,
    SurfaceError,
    TapelogError,
    ToolError,
    UndigestedEventsError,
)
from tapelog._version import __version__
from tapelog.agent import Agent, Hooks, tool
from tapelog.audit import encode_request, rebuild_requests
from tapelog.llm import make_client, register_provider
from tapelog.log._api import (
    SESSION_FORMAT_VERSION,
    EpochHeader,
    Event,
    FrozenDict,
    FrozenList,
    HeaderRecorder,
    LlmCallConfig,
    Session,
    SessionInfo,
    apply_header_delta,
    canonical_header,
    derive_event_message,
    diff_header,
    fold_request_header,
    freeze,
    thaw,
)
from tapelog.store import JsonlStore

__all__ = [
    "SESSION_FORMAT_VERSION",
    "Agent",
    "ClientMismatchError",
    "ContextOverflowError",
    "CorruptLogError",
    "EpochHeader",
    "Event",
    "EventError",
    "ForkError",
    "FormatVersionError",
    "FrozenDict",
    "FrozenError",
    "FrozenList",
    "HeaderError",
    "HeaderRecorder",
    "Hooks",
    "InvalidSessionIdError",
    "JsonValueError",
    "JsonlStore",
    "LlmCallConfig",
    "LogError",
    "OutputError",
    "ProviderError",
    "ReconstructionError",
    "ReentrantAppendError",
    "Session",
    "SessionExistsError",
    "SessionInfo",
    "SessionLockedError",
    "SessionNotFoundError",
    "StoreError",
    "SurfaceError",
    "TapelogError",
    "ToolError",
    "UndigestedEventsError",
    "__version__",
    "apply_header_delta",
    "canonical_header",
    "derive_event_message",
    "diff_header",
    "encode_request",
    "fold_request_header",
    "freeze",
    "make_client",
    "rebuild_requests",
    "register_provider",
    "thaw",
    "tool",
]

_wiring.register_in_process_providers()
