"""The order servers start in never shows in a request: the same servers,
started in different orders (all at once, whichever is ready first, then one
by one in another order), give identical request bytes."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent._harness import agent_on
from tapelog.emulator import Emulator
from tapelog.log._api import Session, encode_str
from tapelog.mcp import McpServers, ServerSpec
from tapelog.mcp._config import parse_config

from ._servers import GIT, TIME, DynamicServer


@pytest.fixture(scope="module")
def dyn() -> Iterator[DynamicServer]:
    with DynamicServer().running() as server:
        yield server


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    (path / "notes.txt").write_text("hello\n")
    return path


def _specs(dyn: DynamicServer, repo: Path) -> dict[str, ServerSpec]:
    return {
        "time": ServerSpec(name="time", command=TIME, args=("--local-timezone", "UTC")),
        "git": ServerSpec(name="git", command=GIT, args=("--repository", str(repo))),
        "dyn": ServerSpec(name="dyn", url=dyn.url),
    }


async def _bodies(servers: McpServers, repo: Path) -> list[bytes]:
    """One turn that calls a tool of each of two servers; the bodies the emulator received."""
    emulator = Emulator()
    arguments = encode_str({"repo_path": str(repo)})
    emulator.push(
        {
            "tool_calls": [
                {"id": "a", "name": "git__git_status", "arguments": arguments},
                {"id": "b", "name": "dyn__echo", "arguments": '{"text": "same"}'},
            ]
        },
        {"text": "One untracked file."},
    )
    async with agent_on(emulator, session=Session(id="order"), tools=[servers]) as agent:
        result = await agent.run("What is the state of the repository?")
    assert result.reason == {"kind": "completed"}
    return [r.body for r in emulator.received]


async def test_start_order_does_not_change_request_bytes(dyn: DynamicServer, repo: Path) -> None:
    specs = _specs(dyn, repo)
    async with McpServers(
        parse_config(
            {
                "mcpServers": {
                    "time": {"command": TIME, "args": ["--local-timezone", "UTC"]},
                    "git": {"command": GIT, "args": ["--repository", str(repo)]},
                    "dyn": {"url": dyn.url},
                }
            }
        )
    ) as servers:  # all at once, whichever is ready first
        first = await _bodies(servers, repo)

    servers = McpServers()
    try:
        for name in ("dyn", "git", "time"):  # one by one, in another order
            await servers.add(specs[name])
        second = await _bodies(servers, repo)
    finally:
        await servers.aclose()

    assert len(first) == 2
    assert b"git__git_status" in first[0]
    assert b"time__get_current_time" in first[0]
    assert b"notes.txt" in first[1]  # the git server's answer reached the model
    assert second == first
