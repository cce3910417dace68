"""Shared CLI plumbing: the store option, error reporting and exit codes.

Exit codes: 0 success, 1 the checked thing is invalid (``verify``), 2 usage or
I/O errors (including any :class:`tapelog.TapelogError`). Without ``--debug`` a
user sees one line ``error: ...``, never a traceback.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from tapelog._errors import TapelogError

__all__ = ["DebugGroup", "store_option"]

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
            click.echo(f"error: {_one_line(exc)}", err=True)
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
