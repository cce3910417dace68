"""``tapelog serve``: the read-only web view of a store, on a loopback port.

The pages show whole logs (model text, tool output), and the server has no
authentication, so it only ever binds a loopback address, like the emulator;
a public host is refused before anything listens. docs/serve.md describes the
pages.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path

import click

from tapelog.cli._common import listen, store_option
from tapelog.cli._emulator_cmd import is_loopback
from tapelog.cli._stores import open_store, store_label

__all__ = ["COMMANDS", "default_index"]


def default_index(label: str) -> Path:
    """Where the sessions index of the store named ``label`` is kept between runs:
    ``$XDG_CACHE_HOME/tapelog/serve/`` (``~/.cache/...``), one file per store."""
    cache_home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    name = hashlib.sha256(label.encode()).hexdigest()[:16]
    return Path(cache_home) / "tapelog" / "serve" / f"{name}.index"


@click.command("serve")
@store_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Loopback address to bind.")
@click.option(
    "--port",
    default=8766,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Port to listen on (0: a free one, printed).",
)
@click.option(
    "--index",
    "index_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Where to keep the sessions index between runs "
    "(default: ~/.cache/tapelog/serve/, one file per store).",
)
@click.option("--memory-index", is_flag=True, help="Keep the sessions index in memory only.")
def serve_cmd(
    store: str | None, host: str, port: int, index_path: Path | None, memory_index: bool
) -> None:
    """Serve a read-only web view of every session in the store, live while they run.

    The sessions page lists every session (sortable, filterable); each
    session's page has the HTML report's content, its forks, a diff of any two
    requests with their exact bodies, and new events as they are stored.
    """
    if not is_loopback(host):
        raise click.BadParameter(
            f"{host} is not a loopback address; the pages show whole session logs and "
            "have no authentication, so bind 127.0.0.1, ::1 or localhost.",
            param_hint="--host",
        )
    import uvicorn

    from tapelog.serve import create_app

    opened = open_store(store)
    label = store_label(opened)
    if memory_index:
        index_path = None
    elif index_path is None:
        index_path = default_index(label)
    app = create_app(opened, index_path=index_path)
    sock = listen(host, port)
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    click.echo(f"http://{shown}:{sock.getsockname()[1]}/")
    click.echo(f"(serving {label} read-only; Ctrl-C stops.)", err=True)
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=2)
    with sock, contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how it stops
        uvicorn.Server(config).run(sockets=[sock])


COMMANDS: list[click.Command] = [serve_cmd]
