"""The agent side: tools the model can call (and, later, the loop that runs them)."""

from tapelog.agent._fs import fs_tools
from tapelog.agent._tools import Tool, ToolOutcome, Toolset, tool

__all__ = [
    "Tool",
    "ToolOutcome",
    "Toolset",
    "fs_tools",
    "tool",
]
