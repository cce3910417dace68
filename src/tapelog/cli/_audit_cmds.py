"""Audit commands: ``cache`` (what each request cached and why not) and ``diff``.

Both read a stored session (by id or file path) and print a table or text for
people, or the stable JSON documented in docs/cli.md with ``--json``.
"""

from __future__ import annotations

import os

import click
from rich.console import Console
from rich.table import Table

from tapelog.audit import CacheReport, RequestDiff, cache_report, request_diff
from tapelog.cli._common import store_option
from tapelog.cli._store_cmds import load_target
from tapelog.log import encode

__all__ = ["COMMANDS"]


def _console() -> Console:
    console = Console(highlight=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(highlight=False, width=160)
    return console


def _pct(value: float) -> str:
    return f"{100 * value:.0f}%"


def cache_table(report: CacheReport) -> Table:
    """One row per loop request; causes as short labels."""
    totals = report.totals
    table = Table(
        title=f"cache audit of session {report.session}",
        caption=(
            f"{totals.requests} request(s) · prompt {totals.prompt_tokens:,} tok · "
            f"cached {totals.cached_reported:,} (expected {totals.cached_expected:,}) · "
            f"hit ratio {_pct(totals.hit_ratio)} · efficiency {_pct(totals.efficiency)}"
        ),
    )
    for column in ("#", "turn", "step", "seq", "rule", "prompt", "cached", "expected", "shared"):
        table.add_column(column, justify="right" if column != "rule" else "left")
    table.add_column("drop / causes")
    for row in report.requests:
        causes = ", ".join(c.label for c in row.causes)
        table.add_row(
            str(row.index),
            str(row.turn),
            str(row.step),
            str(row.seq),
            row.rule,
            f"{row.prompt_tokens:,}",
            f"{row.cached_reported:,}",
            f"{row.cached_expected:,}",
            f"{row.shared_prefix_tokens:,}",
            (f"drop: {causes}" if causes else "drop") if row.drop else "",
        )
    return table


@click.command("cache")
@click.argument("target", metavar="SESSION")
@store_option
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (docs/cli.md).")
def cache_cmd(target: str, store: str | None, as_json: bool) -> None:
    """Audit the prompt cache of SESSION: reported vs expected per request, and why it dropped."""
    session = load_target(target, store)
    report = cache_report(session)
    if as_json:
        click.echo(encode(report.to_json()).decode("utf-8"))
        return
    _console().print(cache_table(report))


def diff_text(diff: RequestDiff) -> str:
    """The diff for people: header fields, then history, each with its seqs."""
    a, b = diff.a, diff.b
    lines = [
        f"request {a.index} (turn {a.turn} step {a.step}, seq {a.seq}) -> "
        f"request {b.index} (turn {b.turn} step {b.step}, seq {b.seq})"
    ]
    header = diff.header
    seqs = ", ".join(map(str, diff.header_seqs)) or "none"
    if header.empty:
        lines.append(f"header: unchanged (header events between: {seqs})")
    else:
        lines.append(f"header: changed (explained by seqs {seqs})")
        for key, (old, new) in header.config.items():
            lines.append(f"  config.{key}: {encode(old).decode()} -> {encode(new).decode()}")
        for label, names in (
            ("added", header.tools_added),
            ("removed", header.tools_removed),
            ("changed", header.tools_changed),
        ):
            if names:
                lines.append(f"  tools {label}: {', '.join(names)}")
        if header.tools_reordered:
            lines.append("  tools reordered")
        if header.system:
            lines.append(f"  system prompt ({header.system_lines} line(s) changed):")
            lines.extend(f"    {line}" for line in header.system)
        if header.prefix is not None:
            lines.append(f"  prefix: {header.prefix[0]} -> {header.prefix[1]} message(s)")
    messages = diff.messages
    lines.append(
        f"messages: {a.messages} -> {b.messages}; {messages.common} history message(s) in common"
    )
    for r in messages.replaced:
        shadowed = ", ".join(map(str, r.replaced)) or "-"
        lines.append(f"  replaced ({r.kind}) by seq {r.by}: seqs {shadowed}")
    if messages.appended:
        lines.append(f"  appended: seqs {', '.join(map(str, messages.appended))}")
    if messages.dropped:
        lines.append(f"  no longer shown: seqs {', '.join(map(str, messages.dropped))}")
    if not (messages.replaced or messages.appended or messages.dropped):
        lines.append("  history unchanged")
    return "\n".join(lines)


@click.command("diff")
@click.argument("target", metavar="SESSION")
@click.argument("a", type=int)
@click.argument("b", type=int)
@store_option
@click.option("--json", "as_json", is_flag=True, help="Print the diff as JSON (docs/cli.md).")
def diff_cmd(target: str, a: int, b: int, store: str | None, as_json: bool) -> None:
    """What changed between loop requests A and B of SESSION (1-based, as `tapelog requests`)."""
    session = load_target(target, store)
    diff = request_diff(session, a, b)
    if as_json:
        click.echo(encode(diff.to_json()).decode("utf-8"))
        return
    click.echo(diff_text(diff))


COMMANDS: list[click.Command] = [cache_cmd, diff_cmd]
