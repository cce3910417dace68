"""The agent ergonomics together, end to end through a store and the real CLI.

A stored session opened with ``Agent.open`` runs tools with deps, an approval
(one call approved, one denied) and a budget that ends a turn; then
``tapelog verify`` accepts the stored log, ``tapelog requests --out`` rebuilds
every body the emulator received, byte for byte, and ``tapelog show`` names
each decision.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import httpx
from click.testing import CliRunner, Result

from tapelog import JsonlStore, LlmCallConfig
from tapelog.agent import Agent, Approval, Budget, Limits, RunContext, ToolCallInfo, tool
from tapelog.audit import render_report
from tapelog.cli import cli
from tapelog.emulator import Emulator
from tapelog.llm import make_client


@dataclass
class Files:
    names: set[str]


@tool(requires_approval=True)
def remove(ctx: RunContext[Files], name: str) -> str:
    """Remove a file.

    Args:
        name: The file.
    """
    ctx.deps.names.discard(name)
    return f"removed {name}"


@tool
def listing(ctx: RunContext[Files]) -> list[str]:
    """List the files."""
    return sorted(ctx.deps.names)


def _invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), obj={"debug": False})


def _remove(name: str) -> dict[str, object]:
    return {"name": "remove", "arguments": f'{{"name": "{name}"}}'}


async def test_a_stored_session_with_deps_approval_and_budget_rebuilds_from_the_cli(
    tmp_path: Path,
) -> None:
    files = Files(names={"a.tmp", "b.txt", "c.tmp"})
    listing_call = {"name": "listing", "arguments": "{}"}
    emulator = Emulator(
        script=[
            {"tool_calls": [listing_call, _remove("a.tmp"), _remove("b.txt")]},
            {"text": "removed a.tmp; b.txt was kept"},
            {"tool_calls": [listing_call]},
            {"tool_calls": [listing_call]},
        ]
    )

    def keep_txt(call: ToolCallInfo) -> Approval:
        if ".txt" in call.arguments:
            return Approval(approved=False, by="ann", reason="keep text files")
        return Approval(approved=True, by="ann")

    store = JsonlStore(tmp_path / "store")
    config = LlmCallConfig(provider="emulator", model="emulator-1")
    async with httpx.AsyncClient(transport=emulator.transport()) as http:
        with Agent.open(
            store,
            "cleanup",
            client=make_client(config, http_client=http),
            config=config,
            tools=[remove, listing],
            deps=files,
            approver=keep_txt,
            budget=Budget(turn=Limits(requests=2)),
        ) as agent:
            assert agent.opened == "created"
            first = await agent.run("remove the temporary files")
            second = await agent.run("list them twice more")
    assert first.ok
    assert files.names == {"b.txt", "c.tmp"}
    assert second.reason["kind"] == "budget"
    assert len(emulator.received) == 4

    root = str(tmp_path / "store")
    verified = _invoke("verify", "cleanup", "--store", root)
    assert verified.exit_code == 0, verified.output
    out = tmp_path / "bodies"
    rebuilt = _invoke("requests", "cleanup", "--store", root, "--out", str(out))
    assert rebuilt.exit_code == 0, rebuilt.output
    bodies = [p.read_bytes() for p in sorted(out.iterdir())]
    assert bodies == [r.body for r in emulator.received]
    shown = _invoke("show", "cleanup", "--store", root)
    assert shown.exit_code == 0, shown.output
    assert "approved by ann" in shown.output
    assert "denied by ann: keep text files" in shown.output
    assert "budget" in shown.output
    # The HTML report's timeline shows each decision where it was made.
    page = render_report(store.load("cleanup").session)
    assert "remove denied by ann: keep text files" in page
    assert "remove approved by ann" in page
