"""Helpers shared by the fs toolset tests."""

from __future__ import annotations

from tapelog.agent import ToolOutcome, Toolset
from tapelog.log import encode_str

__all__ = ["refused", "run_tool"]


async def run_tool(tools: Toolset, name: str, **args: object) -> ToolOutcome:
    """Run one tool with keyword arguments as the model would send them (JSON text)."""
    return await tools.run(name, encode_str(args))


def refused(message: str) -> ToolOutcome:
    """The outcome of a tool that refused with ``ToolError(message)``."""
    return ToolOutcome(
        content=message,
        is_error=True,
        error={"kind": "exception", "type": "ToolError", "message": message},
    )
