"""Shared CLI plumbing: the store option, error reporting and exit codes.

Exit codes: 0 success, 1 the checked thing is invalid (``verify``), 2 usage or
I/O errors (including any :class:`tapelog.TapelogError`). Without ``--debug`` a
user sees one line ``error: ...``, never a traceback.
"""

from __future__ import annotations

import errno
import os
import socket
import stat
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, TypeVar

import click

from tapelog._errors import TapelogError
from tapelog.cli._terminal import terminal_text

__all__ = ["DebugGroup", "OneLineError", "listen", "store_option", "write_output"]

F = TypeVar("F", bound=Callable[..., Any])


def store_option(func: F) -> F:
    """Add ``--store DIR|URL`` as the ``store`` argument (resolved by ``_stores.open_store``)."""
    return click.option(
        "--store",
        "store",
        metavar="DIR|URL",
        default=None,
        help="Session store: a directory of JSONL files, or a PostgreSQL URL "
        "postgresql://USER@HOST/DBNAME[?schema=NAME] (default: $TAPELOG_STORE, "
        "else ~/.local/share/tapelog/sessions).",
    )(func)


_PRIVATE_FILE = 0o600


def write_output(path: Path, data: bytes, *, mkdir: bool = False) -> None:
    """Write a file the user named (with its directory when ``mkdir``); a path
    that cannot be written is one line naming it and what to do.

    What is written (a report, OTel spans, request bodies) holds prompts and
    answers, so a regular file is left owner-only (0600) whatever the umask,
    like the store's own files (docs/security.md, "Terminal and files"); a new
    directory is 0700. A device or pipe named as the output keeps its mode.
    """
    try:
        if mkdir:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
        with open(os.open(path, flags, _PRIVATE_FILE), "wb") as out:
            if stat.S_ISREG(os.fstat(out.fileno()).st_mode):
                os.fchmod(out.fileno(), _PRIVATE_FILE)  # an older file, or a wide umask
            out.write(data)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            hint = "create its directory first, or give another path"
        elif exc.errno == errno.EISDIR:
            hint = "name a file, not a directory"
        else:
            hint = "give another path"
        raise OneLineError(f"cannot write {path} ({exc.strerror or exc}); {hint}.") from None


class OneLineError(click.ClickException):
    """An error click reports as the one line ``error: ...`` with exit code 2."""

    exit_code = 2

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


class DebugGroup(click.Group):
    """A group that turns errors into one line and exit code 2 (``--debug``: traceback)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Exception as exc:
            if (ctx.obj or {}).get("debug"):
                raise
            # The message may quote a provider, a file or a server: printed safe.
            click.echo(f"error: {terminal_text(_one_line(exc))}", err=True)
            ctx.exit(2)


def _one_line(exc: Exception) -> str:
    if isinstance(exc, TapelogError):
        return str(exc)
    if isinstance(exc, OSError):
        return f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": ")
    # Anything else is a bug in tapelog, not in the input: say so, briefly.
    return (
        f"unexpected {type(exc).__name__}: {exc} "
        "(a bug in tapelog; run again with --debug for the traceback)"
    )


def listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket for a local server (the emulator, the proxy).

    Bound before anything is printed: a busy port is one clear error, and the
    URLs printed name the real port (``--port 0`` picks a free one).
    ``TCP_NODELAY`` is set on it, so the connections it accepts inherit it:
    without it a kept-alive client's next small request waits for Nagle's
    algorithm and the peer's delayed ACK, about 40 ms per request on Linux.
    """
    bare = host.strip("[]")
    family = socket.AF_INET6 if ":" in bare else socket.AF_INET
    try:
        sock = socket.create_server((bare, port), family=family)
    except OSError as exc:
        raise click.BadParameter(
            f"cannot listen on {host} port {port} "
            f"({os.strerror(exc.errno) if exc.errno else exc}); "
            "stop what uses it or pick another port (0 picks a free one).",
            param_hint="--port",
        ) from None
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock
