"""Agent commands: run and chat (the loop from the command line)."""

from __future__ import annotations

import asyncio
import io
import os
import signal
import sys
import urllib.parse
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import click

from tapelog._errors import ProviderError
from tapelog.agent import Agent, RuntimeContext, TurnResult, fs_tools
from tapelog.cli._common import store_option
from tapelog.cli._mcp_opts import mcp_options, mcp_specs, start_mcp, with_mcp
from tapelog.cli._providers import providers_option
from tapelog.cli._setup import (
    check_api_key,
    open_session,
    resolve_provider,
    say_what_was_created,
)
from tapelog.cli._stores import open_store
from tapelog.cli._stream_out import stdout_is_terminal, stream_answer
from tapelog.cli._terminal import terminal_text
from tapelog.llm._api import usage_prompt_tokens
from tapelog.store import JsonlStore

__all__ = ["COMMANDS"]


def usage_line(result: TurnResult, session_id: str) -> str:
    """One line: how the turn ended, tokens and cache hit ratio, session id."""
    u = result.usage
    prompt = usage_prompt_tokens(u)
    cached = u.get("cache_read", 0)
    ratio = f"{100 * cached / prompt:.0f}%" if prompt else "n/a"
    return (
        f"[{result.reason['kind']}] turn {result.turn} · {result.steps} step(s) · "
        f"prompt {prompt} tok (cached {cached}, {ratio}) · output {u.get('output', 0)} tok · "
        f"session {session_id}"
    )


def _print_result(result: TurnResult, session_id: str, *, streamed: bool = False) -> None:
    """The answer on stdout (unless ``streamed`` already showed it); why a turn
    failed (else only in the log) and usage on stderr.

    Model and provider text goes through :func:`terminal_text`: no escape
    sequence in it reaches the terminal (the log keeps it as it came)."""
    if result.text and not streamed:
        click.echo(terminal_text(result.text))
    error = result.reason.get("error") if result.reason["kind"] == "error" else None
    if error:
        why = str(error.get("message") or error.get("type"))
        click.echo(f"error: {terminal_text(why)}", err=True)
    click.echo(usage_line(result, session_id), err=True)


def _agent_options(func: Any) -> Any:
    options = [
        click.option(
            "--session", "session_id", default=None, help="Resume (or create) this session id."
        ),
        click.option(
            "--provider",
            default=None,
            help=(
                "Built in (openai, deepseek, anthropic, compatible, local, emulator), a preset "
                "(openrouter, vllm, ollama, lmstudio, together) or one from a providers file."
            ),
        ),
        click.option("--model", default=None, help="Model name (default depends on the provider)."),
        click.option(
            "--base-url", default=None, help="Provider base URL (OpenAI-compatible: include /v1)."
        ),
        click.option("--system", default=None, help="System prompt text."),
        click.option(
            "--system-file",
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            default=None,
            help="Read the system prompt from a file.",
        ),
        click.option(
            "--tools",
            "toolset",
            type=click.Choice(["fs", "none"]),
            default="fs",
            show_default=True,
            help="Built-in tools.",
        ),
        click.option(
            "--workspace",
            type=click.Path(file_okay=False, path_type=Path),
            default=Path("."),
            show_default=True,
            help="Directory the fs tools are confined to.",
        ),
        click.option(
            "--check/--no-check",
            default=None,
            help=(
                "Rebuild every request from the log and compare before sending (default: on, "
                "unless TAPELOG_CHECK=0; it costs what is new, see docs/cli.md)."
            ),
        ),
        click.option(
            "--runtime-context",
            is_flag=True,
            help=(
                "Tell the model the date, the workspace, its git branch and dirty state, the OS "
                "and the shell (in the session prefix; changes are logged as context messages)."
            ),
        ),
        click.option(
            "--accept-undigested",
            is_flag=True,
            help=(
                "Resume a session whose last events follow its last digest (another program "
                "added them, or a crash cut a write); look at them first (docs/security.md)."
            ),
        ),
        providers_option,
        store_option,
    ]
    for option in reversed(options):
        func = option(func)
    return mcp_options(func)


def _system_text(system: str | None, system_file: Path | None) -> str | None:
    if system is not None and system_file is not None:
        raise click.UsageError("give --system or --system-file, not both")
    if system_file is not None:
        try:
            return system_file.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise click.BadParameter(
                f"{system_file} is not UTF-8 text (byte {exc.start} cannot be decoded); "
                "save it as UTF-8 and try again.",
                param_hint="--system-file",
            ) from None
    return system


def _check_utf8(value: str | None, param: str) -> None:
    """Refuse text the shell passed as bytes that are not UTF-8 (Python keeps
    them as lone surrogates, which no log can hold), before anything is stored."""
    if value is not None and not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise click.BadParameter(
                "not valid UTF-8 text (the shell passed bytes in another encoding); "
                "set the terminal or the file to UTF-8 and try again.",
                param_hint=param,
            ) from None


def _check_base_url(url: str | None) -> None:
    """A URL no HTTP client can reach is a usage error now, not four retried
    "connection failed" attempts logged as if the network were down."""
    if url is None:
        return
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise click.BadParameter(
            f"{url!r} is not an http:// or https:// URL with a host; give the provider's "
            "base URL, e.g. http://127.0.0.1:8765/v1.",
            param_hint="--base-url",
        )


async def _with_agent(opts: Mapping[str, Any], body: Any, *, key_first: bool = False) -> None:
    """Open or create the session, set up the provider and run ``body(agent)``.

    ``key_first``: a provider key that is missing is an error before a new
    session is stored (``run``: its one turn could only fail, and an empty
    session would be left behind). A resumed session keeps the logged error turn.
    """
    for name in ("session_id", "provider", "model", "base_url", "system"):
        _check_utf8(opts[name], "--" + name.replace("_id", "").replace("_", "-"))
    _check_base_url(opts["base_url"])
    specs = mcp_specs(opts["mcp_config"], opts["mcp"])  # a bad config: one line, nothing stored
    store = open_store(opts["store"])
    # Checked before the session's id is reserved (which makes the directory).
    new_store = isinstance(store, JsonlStore) and not store.root.exists()
    session, writer, reservation = open_session(
        store, opts["session_id"], accept_undigested=opts["accept_undigested"]
    )
    resumed = writer is not None
    servers = None
    try:
        setup = resolve_provider(
            provider=opts["provider"],
            model=opts["model"],
            base_url=opts["base_url"],
            session=session,
        )
        system = _system_text(opts["system"], opts["system_file"])
        if system is None and resumed and session.header is not None:
            logged = session.header.system
            # A block-list system prompt (logged by the proxy) is a client's, not the loop's.
            system = logged if isinstance(logged, str) else None
        # The store's directory is protected from the tools wherever it lies.
        protected = [store.root] if isinstance(store, JsonlStore) else []
        tools = fs_tools(opts["workspace"], protected=protected) if opts["toolset"] == "fs" else ()
        servers = await start_mcp(specs)  # before a new session is stored: it may not start
        # A new session is stored only once the options are known to be good,
        # so a usage error (or, for run, a missing API key) leaves no empty session behind.
        if writer is None:
            if key_first:
                try:
                    check_api_key(setup.config)
                except ProviderError as exc:
                    await setup.aclose()
                    click.echo(
                        f"error: {terminal_text(str(exc))} Nothing was sent and no session was "
                        "stored.",
                        err=True,
                    )
                    raise click.exceptions.Exit(1) from None
            writer = store.create(session, reservation=reservation)
            say_what_was_created(store, opts["session_id"], new_store=new_store)
        agent = Agent(
            session,
            setup.client,
            config=setup.config,
            system=system,
            tools=with_mcp(tools, servers),
            writer=writer,
            check=opts["check"],
            compaction=setup.compaction,
            context=[RuntimeContext(cwd=opts["workspace"])] if opts["runtime_context"] else (),
        )
        for event in agent.repaired:
            if event.type == "turn/end":
                click.echo(f"note: closed interrupted turn {event.data['turn']} (logged)", err=True)
        try:
            await body(agent)
        finally:
            await setup.aclose()
    finally:
        if servers is not None:
            await servers.aclose()
        if reservation is not None:
            reservation.release()  # unless create took it over
        if writer is not None:
            writer.close()


@click.command("run")
@click.argument("prompt")
@_agent_options
def run_cmd(prompt: str, **opts: Any) -> None:
    """Run one turn of PROMPT and print the answer and a usage line."""
    _check_utf8(prompt, "PROMPT")
    if not prompt.strip():  # as chat skips an empty line; providers refuse empty text
        raise click.BadParameter("it is empty; give the text to send.", param_hint="PROMPT")

    async def body(agent: Agent) -> None:
        loop = asyncio.get_running_loop()
        # Ctrl-C aborts the turn as a logged abort, not a crash mid-stream; so do
        # SIGTERM and SIGHUP, and then the command exits as killed by them.
        loop.add_signal_handler(signal.SIGINT, agent.abort, "interrupt")
        stopped = _on_stop_signals(loop, _abort_on(agent))
        live = stdout_is_terminal()  # print the answer as it streams (see _stream_out)
        try:
            result = await stream_answer(agent, prompt, live=live)
        finally:
            for signum in (signal.SIGINT, *_STOP_SIGNALS):
                loop.remove_signal_handler(signum)
        _print_result(result, agent.session.id, streamed=live)
        if stopped:
            raise click.exceptions.Exit(128 + stopped[0])  # as the shell reports a kill
        if result.reason["kind"] == "error":
            raise click.exceptions.Exit(1)
        if result.reason["kind"] == "aborted":
            raise click.exceptions.Exit(130)  # the shell's code for "stopped by Ctrl-C"

    asyncio.run(_with_agent(opts, body, key_first=True))


_STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
_STOP_REASONS = {signal.SIGTERM: "terminate", signal.SIGHUP: "hangup"}


def _on_stop_signals(
    loop: asyncio.AbstractEventLoop, stop: Callable[[signal.Signals], None]
) -> list[int]:
    """Call ``stop(signum)`` on SIGTERM and SIGHUP; the list the signals received go to."""
    received: list[int] = []

    def handler(signum: signal.Signals) -> None:
        received.append(int(signum))
        stop(signum)

    for signum in _STOP_SIGNALS:
        loop.add_signal_handler(signum, handler, signum)
    return received


def _abort_on(agent: Agent) -> Callable[[signal.Signals], None]:
    """Abort the turn in flight, logged with what was streamed (``by``: terminate, hangup)."""
    return lambda signum: agent.abort(_STOP_REASONS[signum])


def _exit_between_turns(agent: Agent) -> Callable[[signal.Signals], None]:
    def stop(signum: signal.Signals) -> None:
        # No turn is open and the writer flushed at the last turn's end; make
        # sure, then die of the signal as its default action would: the prompt
        # is read in a worker thread that no signal interrupts.
        try:
            if agent.writer is not None:
                agent.writer.flush()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    return stop


def _read_prompt() -> str | None:
    """Read one prompt; a line ending in a backslash continues it. None on EOF."""
    lines: list[str] = []
    while True:
        try:
            line = input("you> " if not lines else "...> ")
        except EOFError:
            return None if not lines else "\n".join(lines)
        if line.endswith("\\"):
            lines.append(line[:-1])
            continue
        lines.append(line)
        return "\n".join(lines)


@click.command("chat")
@_agent_options
def chat_cmd(**opts: Any) -> None:
    """Chat interactively: Ctrl-C aborts the current turn (logged), Ctrl-D exits,
    /compact summarises old history now."""

    def idle_interrupt() -> None:
        # The prompt is read in a worker thread that a signal cannot interrupt:
        # a KeyboardInterrupt here would only land after the next Enter. The
        # terminal has dropped the half-typed line; say what Ctrl-C is for.
        click.echo("\n(no turn is running: Ctrl-C aborts a turn, Ctrl-D exits)", err=True)

    async def body(agent: Agent) -> None:
        loop = asyncio.get_running_loop()
        if isinstance(sys.stdin, io.TextIOWrapper):
            # Bytes that are not UTF-8 reach _check_utf8 as one refused line,
            # instead of failing the read of everything buffered with them.
            sys.stdin.reconfigure(errors="surrogateescape")
        click.echo(f"session {agent.session.id} · Ctrl-C aborts a turn · Ctrl-D exits", err=True)
        loop.add_signal_handler(signal.SIGINT, idle_interrupt)
        _on_stop_signals(loop, _exit_between_turns(agent))
        try:
            while True:
                prompt = await loop.run_in_executor(None, _read_prompt)
                if prompt is None:
                    return
                if not prompt.strip():
                    continue
                try:
                    _check_utf8(prompt, "prompt")
                except click.BadParameter:
                    click.echo(
                        "error: that prompt is not valid UTF-8 text (nothing was logged); "
                        "set the terminal to UTF-8 and type it again",
                        err=True,
                    )
                    continue
                if prompt.strip() == "/compact":
                    done = await agent.compact()
                    note = "compacted history" if done.ok else f"compaction failed: {done.error}"
                    click.echo(terminal_text(f"[{done.id}] {note}"), err=True)
                    continue
                loop.add_signal_handler(signal.SIGINT, agent.abort, "interrupt")
                # During a turn SIGTERM and SIGHUP abort it (logged), then chat exits.
                stopped = _on_stop_signals(loop, _abort_on(agent))
                live = stdout_is_terminal()  # print the answer as it streams (see _stream_out)
                try:
                    result = await stream_answer(agent, prompt, live=live)
                finally:
                    loop.add_signal_handler(signal.SIGINT, idle_interrupt)
                    _on_stop_signals(loop, _exit_between_turns(agent))
                _print_result(result, agent.session.id, streamed=live)
                if stopped:
                    raise click.exceptions.Exit(128 + stopped[0])  # as the shell reports a kill
        finally:
            for signum in (signal.SIGINT, *_STOP_SIGNALS):
                loop.remove_signal_handler(signum)

    asyncio.run(_with_agent(opts, body))


COMMANDS: list[click.Command] = [run_cmd, chat_cmd]
