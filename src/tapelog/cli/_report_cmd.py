"""``tapelog report``: write a session's self-contained HTML cache report."""

from __future__ import annotations

from pathlib import Path

import click

from tapelog.audit import report_html
from tapelog.audit._api import report_parts
from tapelog.cli._checkpointed import loaded_and_audited
from tapelog.cli._common import store_option, write_output

__all__ = ["COMMANDS"]


@click.command("report")
@click.argument("target", metavar="SESSION")
@store_option
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    required=True,
    help="The HTML file to write (replaced if it exists).",
)
def report_cmd(target: str, store: str | None, output: Path) -> None:
    """Write an HTML report of SESSION: cache use per request, timeline, messages.

    SESSION is a session id in the store or the path of a session file. The
    page is one file with everything inline; it loads nothing from the network.
    """
    session, walked, audit = loaded_and_audited(target, store)
    html = report_html(report_parts(session, walked=walked, audit=audit)).encode("utf-8")
    write_output(output, html)
    requests = sum(1 for e in session.events if e.type == "step/start")
    click.echo(f"wrote {output} ({requests} request(s), {len(html) / 1024:.0f} KiB)")


COMMANDS: list[click.Command] = [report_cmd]
