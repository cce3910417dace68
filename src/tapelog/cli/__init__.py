"""The ``tapelog`` command line.

Each command lives in its own module and is registered in :func:`_register`.
Errors a user can cause print one readable line (no traceback unless
``--debug``, accepted anywhere on the command line); see ``_common``.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence

import click

from tapelog._version import __version__
from tapelog.cli import _common, _providers

__all__ = ["cli", "main"]

_QUIET = logging.NullHandler()


@click.group(cls=_common.DebugGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tapelog")
@click.option("--debug", is_flag=True, help="Show full tracebacks on errors (allowed anywhere).")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """tapelog: LLM agents whose session log is the single source of truth."""
    ctx.ensure_object(dict)
    ctx.obj["debug"] = ctx.obj.get("debug", False) or debug
    # Commands print the library's warnings themselves (as ``warning: ...``);
    # without a handler, logging's last resort would print each one again, bare.
    logging.getLogger("tapelog").addHandler(_QUIET)
    # The providers file of the environment, if any; then every known
    # provider's key is a secret from the start (cli._providers).
    _providers.load_cli_providers()


def main(argv: Sequence[str] | None = None) -> None:
    """Console entry point: ``--debug`` may appear anywhere before ``--``."""
    args = list(sys.argv[1:] if argv is None else argv)
    cut = args.index("--") if "--" in args else len(args)
    debug = "--debug" in args[:cut]
    args = [a for a in args[:cut] if a != "--debug"] + args[cut:]
    cli.main(args=args, prog_name="tapelog", obj={"debug": debug})


def _register() -> None:
    # One import per command module; each module exports COMMANDS.
    from tapelog.cli import (
        _agent_cmds,
        _audit_cmds,
        _demo,
        _emulator_cmd,
        _export_cmd,
        _proxy_cmd,
        _rebuild_cmds,
        _report_cmd,
        _serve_cmd,
        _sessions_cmd,
        _store_cmds,
        _worker_cmd,
    )

    modules = (
        _store_cmds,
        _sessions_cmd,
        _agent_cmds,
        _rebuild_cmds,
        _audit_cmds,
        _demo,
        _emulator_cmd,
        _report_cmd,
        _proxy_cmd,
    )
    for module in (*modules, _export_cmd, _serve_cmd, _worker_cmd):
        for command in module.COMMANDS:
            cli.add_command(command)


_register()
