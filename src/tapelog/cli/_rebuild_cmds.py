"""Commands over a stored session's requests: ``requests`` rebuilds every
request a session sent from its log alone, ``fork`` branches a session at a
seq into a new stored one (the audit path and the fork reuse the log's own
functions; nothing here talks to a provider)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from tapelog.audit import encode_request, rebuild_requests
from tapelog.cli._common import store_option, write_output
from tapelog.cli._store_cmds import load_target
from tapelog.cli._stores import open_store
from tapelog.llm._api import wire_named
from tapelog.log import encode
from tapelog.store._api import validate_session_id

__all__ = ["COMMANDS"]


@click.command("requests")
@click.argument("target", metavar="SESSION")
@store_option
@click.option(
    "--wire",
    type=click.Choice(["openai", "anthropic", "responses"]),
    default=None,
    help="Wire format (default: the provider each request used).",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Write each body to DIR/0001.json, 0002.json, ...",
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array instead of a table.")
@click.option(
    "--one-shot",
    "one_shots",
    is_flag=True,
    help="Also rebuild one-shot calls (compaction summaries), in send order.",
)
def requests_cmd(
    target: str,
    store: str | None,
    wire: str | None,
    out: Path | None,
    as_json: bool,
    one_shots: bool,
) -> None:
    """Rebuild every request a session sent, from its log alone."""
    session = load_target(target, store)
    rebuilt = rebuild_requests(session, one_shots=one_shots)
    rows: list[dict[str, Any]] = []
    for item in rebuilt:
        body = encode_request(
            item.request, wire=wire_named(wire, item.request.config) if wire else None
        )
        if out is not None:
            write_output(out / f"{item.index:04d}.json", body, mkdir=True)
        rows.append(
            {
                "index": item.index,
                "kind": item.kind,
                "turn": item.turn,
                "step": item.step,
                "boundary_seq": item.boundary_seq,
                "header_seqs": list(item.header_seqs),
                "provider": item.request.config.provider,
                "model": item.request.config.model,
                "messages": len(item.request.messages),
                "tools": len(item.request.header.tools),
                "bytes": len(body),
                # of the body bytes, so it matches `sha256sum` of the --out file
                "sha256": "sha256:" + hashlib.sha256(body).hexdigest(),
            }
        )
    if as_json:
        click.echo(encode(rows).decode("utf-8"))
        return
    what = "request" if one_shots else "loop request"
    title = f"{len(rows)} {what}{'' if len(rows) == 1 else 's'} rebuilt from session {session.id}"
    table = Table(title=title)
    columns = ("#", "kind", "turn", "step", "seq", "messages", "tools", "bytes", "header")
    for column in columns if one_shots else [c for c in columns if c != "kind"]:
        table.add_column(column, justify="left" if column in ("kind", "header") else "right")
    keys = ("index", "kind", "turn", "step", "boundary_seq", "messages", "tools", "bytes")
    for row in rows:
        header = ", ".join(str(s) for s in row["header_seqs"]) or "-"
        cells = ["-" if row[k] is None else str(row[k]) for k in keys if one_shots or k != "kind"]
        table.add_row(*cells, header)
    Console().print(table)
    if out is not None:
        click.echo(f"wrote {len(rows)} body file(s) to {out}")


@click.command("fork")
@click.argument("target", metavar="SESSION")
@click.option("--at", "at", type=int, required=True, help="Last seq (inclusive) the fork keeps.")
@click.option("--id", "new_id", default=None, help="Id of the new session (default: generated).")
@store_option
def fork_cmd(target: str, at: int, new_id: str | None, store: str | None) -> None:
    """Fork a session at seq AT into a new stored session."""
    if new_id is not None:
        validate_session_id(new_id)  # an empty --id is a mistake, not "generate one"
    session = load_target(target, store)
    child = session.fork(at, id=new_id)
    with open_store(store).create(child):
        pass
    click.echo(child.id)


COMMANDS: list[click.Command] = [requests_cmd, fork_cmd]
