"""The agent side: the loop, its hooks, compaction and trimming, and tools."""

from tapelog.agent._compaction import CompactionPolicy, CompactionResult, choose_region
from tapelog.agent._fs import fs_tools
from tapelog.agent._hooks import Hooks, StepContext, ToolCallInfo
from tapelog.agent._loop import Agent
from tapelog.agent._tools import Tool, ToolOutcome, Toolset, tool
from tapelog.agent._trimming import Trimmer, TrimPolicy, excerpt
from tapelog.agent._turn import RetryPolicy, TurnResult

__all__ = [
    "Agent",
    "CompactionPolicy",
    "CompactionResult",
    "Hooks",
    "RetryPolicy",
    "StepContext",
    "Tool",
    "ToolCallInfo",
    "ToolOutcome",
    "Toolset",
    "TrimPolicy",
    "Trimmer",
    "TurnResult",
    "choose_region",
    "excerpt",
    "fs_tools",
    "tool",
]
