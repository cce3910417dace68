"""Audit commands: ``cache`` (what each request cached and why not) and ``diff``.

Both read a stored session (by id or file path) and print a table or text for
people, or the stable JSON documented in docs/cli.md with ``--json``.
"""

from __future__ import annotations

import os

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from tapelog._errors import SessionNotFoundError
from tapelog.audit import CacheReport, RequestDiff, request_diff
from tapelog.audit._api import edit_sentence, header_sentence
from tapelog.cli._checkpointed import checkpointed_audit
from tapelog.cli._common import store_option
from tapelog.cli._family import family_json, family_members, family_table
from tapelog.cli._store_cmds import load_target
from tapelog.cli._stores import open_store, store_label
from tapelog.cli._terminal import terminal_text
from tapelog.log import encode
from tapelog.store._api import validate_session_id

__all__ = ["COMMANDS"]


def _console() -> Console:
    console = Console(highlight=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(highlight=False, width=160)
    return console


def _pct(value: float) -> str:
    return f"{100 * value:.0f}%"


def cache_caption(report: CacheReport) -> str:
    """The totals, in lines of at most 80 columns (a terminal's default width)."""
    totals = report.totals
    noun = "request" if totals.requests == 1 else "requests"
    cross = totals.bottom_line.cross_session_tokens
    lines = [
        f"{totals.requests:,} {noun} · prompt {totals.prompt_tokens:,} tok · "
        f"cached {totals.cached_reported:,} (expected {totals.cached_expected:,})",
        f"hit ratio {_pct(totals.hit_ratio)} · efficiency {_pct(totals.efficiency)}"
        + (f" · {cross:,} cached by another session" if cross else ""),
    ]
    return "\n".join(lines)


def cache_table(report: CacheReport) -> Table:
    """One row per loop request; causes as short labels."""
    table = Table(
        title=f"cache audit of session {report.session}",
        caption=cache_caption(report),
    )
    for column in ("#", "turn", "step", "seq", "rule", "prompt", "cached", "expected", "shared"):
        table.add_column(column, justify="right" if column != "rule" else "left")
    table.add_column("drop / causes")
    for row in report.requests:
        causes = ", ".join(c.label for c in row.causes)
        shown = (f"drop: {causes}" if causes else "drop") if row.drop else ""
        if row.provider_verdict is not None:  # the provider's own word, beside the audit's
            verdict = f"provider: {row.provider_verdict}"
            if row.provider_agrees is False:
                verdict += " (disagrees)"
            shown = f"{shown} · {verdict}" if shown else verdict
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
            # Log text (tool names, ids): cleaned, and never read as Rich markup.
            Text(terminal_text(shown)),
        )
    return table


def cache_breaks_text(report: CacheReport) -> str:
    """Each cause of each drop as a sentence, request by request (after the table)."""
    lines: list[str] = []
    for row in report.requests:
        if row.provider_agrees is False:
            found = ", ".join(c.label for c in row.causes) or "no change"
            lines.append(
                f"#{row.index} (turn {row.turn} step {row.step}): the provider says "
                f"{row.provider_verdict}, but the log shows {found}"
            )
        for cause in row.causes:
            seqs = ", ".join(map(str, cause.seqs))
            where = f" [seq {seqs}]" if len(cause.seqs) == 1 else f" [seqs {seqs}]"
            lines.append(
                f"#{row.index} (turn {row.turn} step {row.step}): {cause.sentence}"
                + (where if cause.seqs else "")
            )
    if not lines:
        return ""
    return terminal_text("\n".join(["cache breaks:", *(f"  {line}" for line in lines)]))


@click.command("cache")
@click.argument("target", metavar="SESSION")
@store_option
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (docs/cli.md).")
@click.option(
    "--family",
    is_flag=True,
    help="Audit every session of SESSION's client run (its parent, branches and forks): "
    "one line each, and the total.",
)
def cache_cmd(target: str, store: str | None, as_json: bool, family: bool) -> None:
    """Audit the prompt cache of SESSION: reported vs expected per request, and why it dropped."""
    if family:
        _family_cmd(target, store, as_json)
        return
    report = checkpointed_audit(target, store)
    if as_json:
        click.echo(encode(report.to_json()).decode("utf-8"))
        return
    console = _console()
    # The bottom line first: "why is my hit rate low?" answered before any table.
    console.print(Text(report.totals.bottom_line.sentence), soft_wrap=True)
    console.print(cache_table(report))
    breaks = cache_breaks_text(report)
    if breaks:
        console.print(Text(breaks), soft_wrap=True)


def _family_cmd(target: str, store: str | None, as_json: bool) -> None:
    opened = open_store(store)
    validate_session_id(target)
    if not opened.exists(target):
        raise SessionNotFoundError(f"no session {target!r} in {store_label(opened)}")
    members = family_members(opened, target)
    if as_json:
        click.echo(encode(family_json(members)).decode("utf-8"))
        return
    _console().print(family_table(members))


_VALUE_CHARS = 200


def _bounded(value: object) -> str:
    """A config value as JSON, cut to 200 characters (extras may hold whole schemas)."""
    text = encode(value).decode()
    return text if len(text) <= _VALUE_CHARS else text[: _VALUE_CHARS - 1] + "…"


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
            lines.append(f"  config.{key}: {_bounded(old)} -> {_bounded(new)}")
        for label, names in (
            ("added", header.tools_added),
            ("removed", header.tools_removed),
            ("changed", header.tools_changed),
        ):
            if names:
                where = ""
                if label == "added" and header.tools_at_end:
                    where = " (at the end)"
                elif label == "added":
                    positions = ", ".join(str(header.tools_added_at[n]) for n in names)
                    where = f" (at position {positions})"
                lines.append(f"  tools {label}: {', '.join(names)}{where}")
        if header.tools_reordered:
            lines.append("  tools reordered")
        if header.system:
            lines.append(f"  system prompt ({header.system_changed}):")
            lines.extend(f"    {line}" for line in header.system)
        if header.prefix is not None:
            lines.append(f"  prefix: {header.prefix[0]} -> {header.prefix[1]} message(s)")
        words = header_sentence({**header.to_json(), "system_lines": header.system_lines})
        lines.append(f"  in short: {words}")
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
    if messages.edits:
        lines.append("  sent differently by the client:")
        lines.extend(f"    {edit_sentence(e.to_json())}" for e in messages.edits)
        if messages.edits_total > len(messages.edits):
            lines.append(f"    ... {messages.edits_total - len(messages.edits)} more")
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
    click.echo(terminal_text(diff_text(diff)))


COMMANDS: list[click.Command] = [cache_cmd, diff_cmd]
