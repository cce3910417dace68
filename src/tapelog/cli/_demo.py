"""``tapelog demo``: the whole promise, offline, in under a minute.

A scripted multi-turn session on the in-process emulator (or the local model)
that calls tools, registers a tool mid-session (one header delta), restarts
the loop (a ``resume`` snapshot), then prints a per-request table of prompt and
cached tokens with what changed, and proves every request rebuilds byte-exact
from the log alone.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import tempfile
from pathlib import Path
from typing import Any

import click
import httpx
from rich.console import Console
from rich.table import Table
from rich.text import Text

from tapelog.agent import Agent, Toolset, fs_tools, tool
from tapelog.audit import cache_report, encode_request, rebuild_requests
from tapelog.audit._api import header_change
from tapelog.cli._common import store_option
from tapelog.cli._stores import open_store
from tapelog.emulator import Emulator
from tapelog.llm import ProviderClient, make_client
from tapelog.llm._api import usage_prompt_tokens
from tapelog.log._api import Event, LlmCallConfig, Session
from tapelog.store import SessionWriter

__all__ = ["COMMANDS"]

SYSTEM = (
    "You are a careful assistant working in a small workspace.\n"
    "Use the tools to look at files before answering.\n"
    "Answer briefly."
)

LOCAL_NOTE = (
    "note: the answers come from SmolLM2-135M, a tiny 135M-parameter model, capped at "
    "48 tokens and offered no tools in turn 1, so odd or cut-off answers are expected "
    "and not a bug; what the demo checks is that every request rebuilds byte-exact."
)

PROMPTS = (
    "What files are in the workspace? Read notes.txt.",
    "How many words are in notes.txt?",
    "Summarise what we did in one sentence.",
)

NOTES = (
    "Prefix caches reward append-only requests. tapelog builds every request from the log,\n"
    "so each request extends the one before and the provider cache keeps hitting.\n"
)


def _words(text: str) -> int:
    """What the ``word_count`` tool counts, so the scripted answer can state it."""
    return len(text.split())


# A scripted answer states only what the tool results before it say: the word
# count is computed from NOTES, so editing the note cannot make the answer false.
SCRIPT: list[dict[str, Any]] = [
    {
        "tool_calls": [
            {"id": "call_1", "name": "list_dir", "arguments": '{"path": "."}'},
            {"id": "call_2", "name": "read_file", "arguments": '{"path": "notes.txt"}'},
        ]
    },
    {
        "text": "The workspace has notes.txt and todo.md; "
        "notes.txt is a short note on prefix caches."
    },
    {"tool_calls": [{"id": "call_3", "name": "word_count", "arguments": '{"path": "notes.txt"}'}]},
    {"text": f"notes.txt has {_words(NOTES)} words."},
    {"text": "We listed the workspace, read notes.txt and counted its words."},
]


def _make_workspace(root: Path) -> Path:
    (root / "notes.txt").write_text(NOTES, encoding="utf-8")
    (root / "todo.md").write_text("- try tapelog demo\n- read docs/format.md\n", encoding="utf-8")
    return root


def _word_count_tool(workspace: Path) -> Any:
    @tool
    def word_count(path: str) -> str:
        """Count the words in a workspace file.

        Args:
            path: File path relative to the workspace.
        """
        target = (workspace / path).resolve()
        if workspace.resolve() not in target.parents:
            return f"path {path!r} is outside the workspace"
        return f"{_words(target.read_text(encoding='utf-8'))} words"

    return word_count


def _what_changed(events: list[Event]) -> str:
    """The header events before a request, in the audit report's own words."""
    parts = [
        header_change(e) if e.type == "request/header" else "header delta: " + header_change(e)
        for e in events
    ]
    return "; ".join(parts) or "history appended"


async def _ask(agent: Agent, prompt: str, console: Console) -> None:
    console.print(f"[dim]> {prompt}[/]")
    result = await agent.run(prompt)
    console.print(f"  {result.text or result.reason['kind']}")


async def _run_demo(store_value: str | None, provider: str, console: Console) -> bool:
    store = open_store(store_value)
    with tempfile.TemporaryDirectory(prefix="tapelog-demo-") as tmp:
        workspace = _make_workspace(Path(tmp))
        emulator: Emulator | None = None
        http: httpx.AsyncClient | None = None
        if provider == "emulator":
            emulator = Emulator(script=SCRIPT)
            http = httpx.AsyncClient(transport=emulator.transport(), timeout=60.0)
            config = LlmCallConfig(provider="emulator", model="emulator-1")
            client: ProviderClient = make_client(config, http_client=http)
            tools: Toolset = fs_tools(workspace)
        else:
            config = LlmCallConfig(
                provider="local", model="smollm2-135m", max_tokens=48, temperature=0.0
            )
            client = make_client(config)
            tools = Toolset(())
        session = Session(cwd=str(workspace))

        def make_agent(log: Session, writer: SessionWriter) -> Agent:
            return Agent(
                log, client, config=config, system=SYSTEM, tools=tools, writer=writer, check=True
            )

        # soft_wrap: the session id is copied from here, so the line is never wrapped
        title = f"[bold]tapelog demo[/] · provider [cyan]{provider}[/]"
        console.print(f"{title} · session [cyan]{session.id}[/]", soft_wrap=True)
        if provider == "local":
            console.print(LOCAL_NOTE)
        try:
            with store.create(session) as writer:
                agent = make_agent(session, writer)
                for i, prompt in enumerate(PROMPTS[:2]):
                    if i == 1:
                        agent.add_tool(_word_count_tool(workspace))
                    await _ask(agent, prompt, console)
            console.print("[dim]-- loop restarted: a new process would do exactly this --[/]")
            session, writer = store.open(session.id)
            with writer:
                if "word_count" not in tools:  # a new process registers its tools again
                    tools.add(_word_count_tool(workspace))
                await _ask(make_agent(session, writer), PROMPTS[2], console)
        finally:
            if http is not None:
                await http.aclose()
        return _report(store.load(session.id).session, emulator, console, store_value)


def _inspect_commands(session_id: str, store_value: str | None) -> list[str]:
    """The commands that inspect the demo session, ready to paste (``--store`` if given)."""
    store = f" --store {shlex.quote(store_value)}" if store_value is not None else ""
    return [
        f"tapelog show {session_id}{store}",
        f"tapelog cache {session_id}{store}",
        f"tapelog requests {session_id}{store} --out bodies",
    ]


def _report(
    session: Session, emulator: Emulator | None, console: Console, store_value: str | None
) -> bool:
    events = list(session.events)
    rebuilt = rebuild_requests(events, session_id=session.id)
    messages = [e for e in events if e.type == "assistant/message"]
    table = Table(title="Loop requests, rebuilt from the log")
    for column in ("#", "turn.step", "prompt tok", "cached tok", "hit", "what changed", "bytes"):
        table.add_column(column, justify="left" if column == "what changed" else "right")
    exact = 0
    for item, message in zip(rebuilt, messages, strict=True):
        body = encode_request(item.request)
        same = emulator is None or emulator.received[item.index - 1].body == body
        exact += same
        usage = message.data.get("usage") or {}
        prompt = usage_prompt_tokens(usage)
        cached = usage.get("cache_read", 0)
        header_events = [events[s] for s in item.header_seqs]
        table.add_row(
            str(item.index),
            f"{item.turn}.{item.step}",
            str(prompt),
            str(cached),
            f"{100 * cached / prompt:.0f}%" if prompt else "-",
            _what_changed(header_events),
            f"{len(body)}{'' if same else ' ✗'}",
        )
    console.print(table)
    # The audit's answer to "why is my hit rate low?", as `tapelog cache` starts with it.
    line = cache_report(session).totals.bottom_line.sentence
    console.print(Text(f"Cache: {line}"), soft_wrap=True)
    where = (
        "the bytes the emulator received"
        if emulator is not None
        else "the invariant checker's comparison"
    )
    ok = exact == len(rebuilt)
    mark = "[green]✓[/]" if ok else "[red]✗[/]"
    console.print(
        f"{mark} {exact}/{len(rebuilt)} requests rebuilt byte-exact from the log ({where})."
    )
    console.print("Inspect it:")
    for command in _inspect_commands(session.id, store_value):
        # Never wrapped or cropped, at any width or piped: a command is copied whole.
        console.print(Text("  " + command), soft_wrap=True)
    return ok


@click.command("demo")
@store_option
@click.option(
    "--provider",
    type=click.Choice(["emulator", "local"]),
    default="emulator",
    show_default=True,
    help="Run on the offline emulator or the embedded local model.",
)
def demo_cmd(store: str | None, provider: str) -> None:
    """A scripted multi-turn session that shows every request rebuilding byte-exact."""
    console = Console()
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(width=160)  # piped: room for the table, as the other commands give
    ok = asyncio.run(_run_demo(store, provider, console))
    if not ok:
        raise click.exceptions.Exit(1)


COMMANDS: list[click.Command] = [demo_cmd]
