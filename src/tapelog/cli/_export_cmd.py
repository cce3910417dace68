"""``tapelog export``: a session in another tool's format; ``otel`` for OpenTelemetry.

``export`` is a group so further formats can join ``otel`` as subcommands.
The OpenTelemetry packages are the optional ``otel`` extra: this module (and
so every other command) never imports them; ``export otel`` checks for them
first and names the extra in one line when they are missing.
"""

from __future__ import annotations

from pathlib import Path

import click

from tapelog.cli._common import OneLineError, store_option, write_output
from tapelog.cli._store_cmds import load_target
from tapelog.export import otel_spans, otlp_json, send_otlp
from tapelog.export._api import require_otel
from tapelog.export._api import traces_endpoint as resolve_endpoint

__all__ = ["COMMANDS"]


@click.group("export")
def export_group() -> None:
    """Export a session for other tools (see `tapelog export otel --help`)."""


@export_group.command("otel")
@click.argument("target", metavar="SESSION")
@click.option(
    "--endpoint",
    metavar="URL",
    default=None,
    help="OTLP/HTTP receiver, e.g. http://127.0.0.1:4318 (/v1/traces is added to a URL "
    "without a path). Default: $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, "
    "else $OTEL_EXPORTER_OTLP_ENDPOINT.",
)
@click.option(
    "--file",
    "file",
    metavar="FILE",
    type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
    default=None,
    help="Write OTLP JSON lines to FILE instead (- for stdout).",
)
@click.option(
    "--content",
    is_flag=True,
    help="Also export message text, tool arguments and results (registered secrets "
    "redacted). Off by default: content can hold private data.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.1, max=600),
    default=10.0,
    show_default=True,
    metavar="SECONDS",
    help="How long the exporter may try (with its retries) per request.",
)
@store_option
def otel_cmd(
    target: str,
    endpoint: str | None,
    file: Path | None,
    content: bool,
    timeout: float,
    store: str | None,
) -> None:
    """Export SESSION as OpenTelemetry spans (GenAI semantic conventions).

    One trace per session: a span per turn (invoke_agent), per model call
    (chat MODEL) and per tool call (execute_tool NAME), with token usage,
    cached tokens and the cache audit. Ids derive from the session id, so
    exporting again gives the same trace. Mapping: docs/otel.md.
    """
    if endpoint is not None and file is not None:
        raise click.UsageError("give --endpoint or --file, not both")
    require_otel()
    url = None if file is not None else resolve_endpoint(endpoint)
    if file is None and url is None:
        raise OneLineError(
            "nowhere to export to: give --endpoint URL (an OTLP/HTTP receiver), "
            "--file FILE, or set OTEL_EXPORTER_OTLP_ENDPOINT"
        )
    session = load_target(target, store)
    trace = otel_spans(session, content=content)
    what = (
        f"{len(trace.spans)} span(s): {trace.turns} turn(s), {trace.model_calls} model "
        f"call(s), {trace.tool_calls} tool call(s); trace {trace.trace_id_hex}"
    )
    if file is not None:
        data = otlp_json(trace)
        if str(file) == "-":
            click.echo(data, nl=False)  # bytes: written as they are
            click.echo(f"exported {what}", err=True)
        else:
            write_output(file, data)
            click.echo(f"wrote {file} ({what})")
        return
    assert url is not None
    send_otlp(trace, url, timeout=timeout)  # an ExportError is one line (cli._common)
    click.echo(f"exported {what} to {url}")


COMMANDS: list[click.Command] = [export_group]
