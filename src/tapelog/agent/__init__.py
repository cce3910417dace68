"""The agent side: the loop, its hooks, compaction and trimming, and tools."""

from tapelog.agent._approval import Approval
from tapelog.agent._budget import Budget, Limits
from tapelog.agent._compaction import CompactionPolicy
from tapelog.agent._fs_tools import fs_tools
from tapelog.agent._hooks import Hooks, StepContext, ToolCallInfo
from tapelog.agent._loop import Agent
from tapelog.agent._output import OutputSpec
from tapelog.agent._pricing import Price
from tapelog.agent._runtime_context import ContextSource, RuntimeContext
from tapelog.agent._schema_tool import SchemaTool
from tapelog.agent._stream import (
    AttemptFailed,
    MessageEvent,
    ReasoningDelta,
    StepEnd,
    StreamEvent,
    TextDelta,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
)
from tapelog.agent._tool_context import RunContext
from tapelog.agent._tools import Tool, ToolOutcome, Toolset, ToolSource, tool
from tapelog.agent._trimming import TrimPolicy
from tapelog.agent._turn import RetryPolicy, TurnResult

__all__ = [
    "Agent",
    "Approval",
    "AttemptFailed",
    "Budget",
    "CompactionPolicy",
    "ContextSource",
    "Hooks",
    "Limits",
    "MessageEvent",
    "OutputSpec",
    "Price",
    "ReasoningDelta",
    "RetryPolicy",
    "RunContext",
    "RuntimeContext",
    "SchemaTool",
    "StepContext",
    "StepEnd",
    "StreamEvent",
    "TextDelta",
    "Tool",
    "ToolCallEvent",
    "ToolCallInfo",
    "ToolOutcome",
    "ToolResultEvent",
    "ToolSource",
    "Toolset",
    "TrimPolicy",
    "TurnEnd",
    "TurnResult",
    "fs_tools",
    "tool",
]
