"""Helpers shared by the fs toolset tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tapelog.agent import ToolOutcome, Toolset
from tapelog.log._api import encode_str

__all__ = ["refused", "run_tool", "use_fake_home"]


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


def use_fake_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home directory of the test's own, so the default protections are known."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.delenv("TAPELOG_STORE", raising=False)
    return home
