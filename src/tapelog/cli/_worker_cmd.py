"""``tapelog worker``: run queued agent turns (:mod:`tapelog.dbos`) until stopped.

Every worker of a database takes turns from the same DBOS queue, so starting
more workers, on any machine, runs more turns at once; a worker killed
mid-turn has its turn finished by another (docs/scale.md). The agent options
(provider, model, system prompt, tools) are the worker's: every turn it runs
uses them, with the provider key from its environment (never from the queue).
"""

from __future__ import annotations

import contextlib
import importlib.util
import signal
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import click

from tapelog.agent import Agent, fs_tools
from tapelog.cli._agent_cmds import _check_base_url, _system_text
from tapelog.cli._common import store_option
from tapelog.cli._providers import providers_option
from tapelog.cli._setup import resolve_provider
from tapelog.cli._stores import open_store, store_label
from tapelog.dbos import Worker
from tapelog.log._api import Session
from tapelog.store import PostgresStore, SessionWriter

__all__ = ["COMMANDS"]


def _agents(opts: dict[str, Any], system: str | None) -> Any:
    """The agent of each turn, made as ``tapelog run`` makes its own."""

    @contextlib.asynccontextmanager
    async def agents(session: Session, writer: SessionWriter) -> AsyncIterator[Agent]:
        setup = resolve_provider(
            provider=opts["provider"],
            model=opts["model"],
            base_url=opts["base_url"],
            session=session,
            quiet=True,
        )
        workspace = opts["workspace"]
        tools = fs_tools(workspace) if opts["toolset"] == "fs" else ()
        try:
            yield Agent(
                session,
                setup.client,
                config=setup.config,
                system=system,
                tools=tools,
                writer=writer,
                check=opts["check"],
                compaction=setup.compaction,
            )
        finally:
            await setup.aclose()

    return agents


@click.command("worker")
@store_option
@click.option("--provider", default=None, help="The provider every turn uses (as for run).")
@click.option("--model", default=None, help="Model name (default depends on the provider).")
@click.option("--base-url", default=None, help="Provider base URL (OpenAI-compatible: with /v1).")
@click.option("--system", default=None, help="System prompt text.")
@click.option(
    "--system-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Read the system prompt from a file.",
)
@click.option(
    "--tools",
    "toolset",
    type=click.Choice(["fs", "none"]),
    default="none",
    show_default=True,
    help="Built-in tools (fs: confined to --workspace).",
)
@click.option(
    "--workspace",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    default=Path("."),
    show_default=True,
    help="Directory the fs tools are confined to.",
)
@click.option("--check/--no-check", default=None, help="The invariant checker (default: on).")
@click.option(
    "--concurrency",
    type=click.IntRange(1, 256),
    default=4,
    show_default=True,
    help="Turns this worker runs at once (one per session at a time, whatever the workers).",
)
@click.option(
    "--dbos-schema",
    default="dbos",
    show_default=True,
    help="The PostgreSQL schema of DBOS's tables (the queue), in the store's database.",
)
@providers_option
def worker_cmd(store: str | None, concurrency: int, dbos_schema: str, **opts: Any) -> None:
    """Run queued agent turns from the store's PostgreSQL database until stopped.

    Turns are enqueued with tapelog.dbos.TurnQueue (docs/scale.md). Ctrl-C or
    SIGTERM stops the worker; a turn it was running is finished by another
    worker, exactly once (the log says what was done).
    """
    _check_base_url(opts["base_url"])
    system = _system_text(opts["system"], opts["system_file"])
    resolve_provider(  # a bad provider or model is one line now, not an error per turn
        provider=opts["provider"],
        model=opts["model"],
        base_url=opts["base_url"],
        session=Session(),
        quiet=True,
    )
    target = open_store(store)
    if not isinstance(target, PostgresStore):
        raise click.BadParameter(
            f"{store_label(target)} is a directory; workers share a PostgreSQL store, whose "
            "database also holds their queue: give a postgresql:// URL.",
            param_hint="--store",
        )
    if importlib.util.find_spec("dbos") is None:
        raise click.ClickException(
            "tapelog worker needs DBOS; install it with `pip install 'tapelog[dbos]'`"
        )
    worker = Worker(
        target, _agents(opts, system), concurrency=concurrency, system_schema=dbos_schema
    )
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    worker.start()
    click.echo(
        f"worker {worker.executor_id} running turns from {store_label(target)} "
        f"({concurrency} at once); Ctrl-C stops it",
        err=True,
    )
    try:
        stop.wait()
    finally:
        worker.stop()


COMMANDS = [worker_cmd]
