"""``tapelog emulator``: serve the provider emulator on a loopback port.

The emulator has no authentication and answers anything, so it only ever binds
a loopback address; a public host is refused before anything listens.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import click

from tapelog._loopback import is_loopback
from tapelog.cli._common import listen

__all__ = ["COMMANDS", "base_urls", "is_loopback"]


def base_urls(host: str, port: int) -> dict[str, str]:
    """The base URL to give each provider's client (they append their own paths)."""
    shown = f"[{host}]" if ":" in host else host
    root = f"http://{shown}:{port}"
    return {
        "emulator": f"{root}/v1",
        "deepseek": f"{root}/deepseek",
        "openai": f"{root}/openai/v1",
        "anthropic": f"{root}/anthropic",
    }


@click.command("emulator")
@click.option("--host", default="127.0.0.1", show_default=True, help="Loopback address to bind.")
@click.option(
    "--port",
    default=8765,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Port to listen on (0: a free one, printed).",
)
@click.option(
    "--script",
    "script_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="JSON array or JSONL file of scripted replies (docs/emulator.md).",
)
@click.option(
    "--context-window",
    type=click.IntRange(min=1),
    default=None,
    help="Answer prompts estimated above N tokens with the context-length error.",
)
@click.option(
    "--cache-diagnostics",
    is_flag=True,
    help="Answer chat completions with prompt_cache_diagnostics: each request compared "
    "with the previous one of its cache rule (docs/emulator.md).",
)
def emulator_command(
    host: str,
    port: int,
    script_path: Path | None,
    context_window: int | None,
    cache_diagnostics: bool,
) -> None:
    """Serve local DeepSeek, OpenAI and Anthropic endpoints with cache accounting."""
    if not is_loopback(host):
        raise click.BadParameter(
            f"{host} is not a loopback address; the emulator has no authentication, "
            "so bind 127.0.0.1, ::1 or localhost.",
            param_hint="--host",
        )
    import uvicorn

    from tapelog.emulator import Emulator, load_script

    script = None
    if script_path is not None:
        try:
            script = load_script(script_path)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--script") from None
    emu = Emulator(
        script=script, context_window=context_window, cache_diagnostics=cache_diagnostics
    )
    sock = listen(host, port)
    for provider, url in base_urls(host, sock.getsockname()[1]).items():
        click.echo(f"{provider:<10} {url}")
    click.echo("(emulator and deepseek: DeepSeek cache rule; Ctrl-C stops.)", err=True)
    with sock, contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how it stops
        uvicorn.Server(uvicorn.Config(emu.app, log_level="warning")).run(sockets=[sock])


COMMANDS: list[click.Command] = [emulator_command]
