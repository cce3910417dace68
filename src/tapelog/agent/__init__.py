"""The agent side: the loop, its hooks, and the tools the model can call."""

from tapelog.agent._fs import fs_tools
from tapelog.agent._hooks import Hooks, StepContext, ToolCallInfo
from tapelog.agent._loop import Agent, RetryPolicy, TurnResult
from tapelog.agent._tools import Tool, ToolOutcome, Toolset, tool

__all__ = [
    "Agent",
    "Hooks",
    "RetryPolicy",
    "StepContext",
    "Tool",
    "ToolCallInfo",
    "ToolOutcome",
    "Toolset",
    "TurnResult",
    "fs_tools",
    "tool",
]
