"""Store commands: ``verify`` and ``show`` (``sessions`` is ``_sessions_cmd``).

``verify`` and ``show`` take a session id (looked up in ``--store``) or the
path of a session file, so a log copied off another machine can be checked
where it lies. Output is for people; ``--json`` is for scripts.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from tapelog._errors import (
    CorruptLogError,
    InvalidSessionIdError,
    SessionNotFoundError,
    StoreError,
)
from tapelog.cli._common import store_option
from tapelog.cli._stores import open_store
from tapelog.cli._terminal import terminal_text
from tapelog.log._api import Event, Session, chunk_kind, encode_str
from tapelog.store import JsonlStore, LoadedSession
from tapelog.store._api import (
    VerifyReport,
    read_session_bytes,
    read_session_file,
    validate_session_id,
    verify_jsonl,
)

__all__ = [
    "COMMANDS",
    "echo_warnings",
    "load_target",
    "load_target_bytes",
    "load_warnings",
    "target_file",
]

_MAX_PROBLEMS_SHOWN = 50
_EXCERPT = 72


def _resolve(target: str) -> tuple[Path | None, str | None]:
    """A session file path, or else the session id to look up in the store.

    An existing file wins whatever the store is, so a log copied off another
    machine is read where it lies.
    """
    if not target:
        return None, target  # not the current directory: the store says why '' is no id
    path = Path(target)
    try:
        is_file, is_dir = path.is_file(), path.is_dir()
    except OSError:  # a name the file system refuses (too long): no file by that name
        is_file = is_dir = False
    if is_file:
        return path, None
    if is_dir and not _is_session_id(target):  # a directory named like an id hides no session
        raise StoreError(f"{target} is a directory; give a session id or a session file")
    if os.sep in target or target.endswith(".jsonl"):
        raise SessionNotFoundError(f"no session file at {target}; check the path")
    return None, target


def _is_session_id(text: str) -> bool:
    try:
        validate_session_id(text)
    except InvalidSessionIdError:
        return False
    return True


def load_target(target: str, store: str | None) -> Session:
    """Load a session named by id (in the store ``store`` names) or by file path, read-only.

    Warnings (a dropped torn tail) go to stderr; the session is returned.
    """
    return _load_target(target, store).session


def target_file(target: str, store: str | None) -> tuple[Path, bytes, str] | None:
    """The file a session is stored in, its bytes, and how it was named
    (``file:PATH`` or ``store:PATH``: the load's warnings name it so), when it
    is one JSONL file (a file target, or an id in a JSONL store; ``None`` for
    another backend): what a file derived from the log, beside it, is keyed by."""
    path, session_id = _resolve(target)
    kind = "file"
    if path is None:
        opened = open_store(store)
        if not isinstance(opened, JsonlStore):
            return None
        assert session_id is not None
        path, kind = opened.locate(session_id), "store"
    return path, path.read_bytes(), f"{kind}:{path.resolve()}"


def load_target_bytes(target: str, store: str | None, data: bytes) -> LoadedSession:
    """:func:`load_target` replaying ``data``, the bytes :func:`target_file` read
    (so what is derived from the session is derived from exactly those bytes).
    Its warnings are the caller's to echo (:func:`load_warnings`)."""
    path, session_id = _resolve(target)
    if path is not None:
        loaded, _ = read_session_bytes(data, source=str(path))
    else:
        opened = open_store(store)
        assert session_id is not None
        assert isinstance(opened, JsonlStore)
        loaded = opened.load_bytes(session_id, data)
    return loaded


def _load_target(target: str, store: str | None) -> LoadedSession:
    path, session_id = _resolve(target)
    if path is not None:
        loaded = read_session_file(path)
    else:
        assert session_id is not None
        loaded = open_store(store).load(session_id)
    return _warned(loaded)


def load_warnings(loaded: LoadedSession) -> tuple[str, ...]:
    """What a load has to say on stderr (a dropped torn tail, undigested events)."""
    note = loaded.undigested_note()
    return (*loaded.warnings, *([note] if note else []))


def echo_warnings(warnings: Iterable[str]) -> None:
    for warning in warnings:
        click.echo(f"warning: {terminal_text(warning)}", err=True)


def _warned(loaded: LoadedSession) -> LoadedSession:
    """``loaded``, after its warnings went to stderr."""
    echo_warnings(load_warnings(loaded))
    return loaded


def _console() -> Console:
    console = Console(highlight=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(highlight=False, width=160)
    return console


def _count(n: int, noun: str) -> str:
    """``1 tool``, ``0 tools``, ``3 tools``: no "1 tools" in what people read."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _clock(ms: int, *, date: bool = False) -> str:
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    text = moment.strftime("%Y-%m-%d %H:%M:%S" if date else "%H:%M:%S.%f")
    return text if date else text[:-3]


# --- verify ------------------------------------------------------------------


def _verify_json(label: str, report: VerifyReport | None, problems: list[Any]) -> str:
    """``verify --json``: the verdict, every problem, and the last digest."""
    stats = report.stats if report is not None else None
    digest = report.digest if report is not None else None
    return encode_str(
        {
            "session": label,
            "ok": report is not None and report.ok,
            "problems": problems,
            "warnings": list(report.warnings) if report is not None else [],
            "notes": list(report.notes) if report is not None else [],
            "stats": None if stats is None else asdict(stats),
            "digest": None if digest is None else digest.to_json(),
        }
    )


@click.command("verify")
@click.argument("target", metavar="SESSION")
@store_option
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the verdict as JSON, with the last digest (to keep elsewhere).",
)
@click.pass_context
def verify_cmd(ctx: click.Context, target: str, store: str | None, as_json: bool) -> None:
    """Check that a stored session is a valid tapelog log.

    SESSION is a session id in the store or the path of a session file. Exit
    status: 0 valid (a torn final line is a warning), 1 invalid (each problem
    is listed with its line and seq), 2 the session could not be read.
    """
    path, expected_id = _resolve(target)
    if path is not None:
        data, label = path.read_bytes(), str(path)
    else:
        assert expected_id is not None
        label = expected_id
        try:
            data = open_store(store).session_bytes(expected_id)
        except CorruptLogError as exc:  # rows no file could hold line for line
            if as_json:
                line = exc.line
                found = {"line": line, "seq": None if line is None else line - 2}
                click.echo(_verify_json(label, None, [{**found, "message": str(exc)}]))
                ctx.exit(1)
            click.echo(f"  {exc}")
            click.echo(f"{label}: invalid (1 problem)")
            ctx.exit(1)
    report = verify_jsonl(data, expected_id=expected_id)
    if as_json:
        problems = [{"line": p.line, "seq": p.seq, "message": p.message} for p in report.problems]
        click.echo(_verify_json(label, report, problems))
        ctx.exit(0 if report.ok else 1)
    for warning in report.warnings:
        click.echo(f"warning: {terminal_text(warning)}", err=True)
    if not report.ok:
        for problem in report.problems[:_MAX_PROBLEMS_SHOWN]:
            click.echo(f"  {terminal_text(str(problem))}")
        hidden = len(report.problems) - _MAX_PROBLEMS_SHOWN
        if hidden > 0:
            click.echo(f"  ... and {_count(hidden, 'more problem')}")
        click.echo(f"{label}: invalid ({_count(len(report.problems), 'problem')})")
        ctx.exit(1)
    for note in report.notes:
        click.echo(f"note: {note}")
    click.echo(f"ok: {label}: {report.stats}")


# --- show --------------------------------------------------------------------


def _excerpt(text: str, limit: int = _EXCERPT) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _blocks_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content:
        kind = block.get("type")
        if kind in ("text", "reasoning"):
            parts.append(("(thinking) " if kind == "reasoning" else "") + block["text"])
        elif kind == "tool_call":
            parts.append(f"→ {block['name']}({block['arguments']})")
        elif kind == "tool_result":
            parts.append(f"← {block['tool_call_id']}")
        else:
            parts.append(f"[{kind}]")
    return " ".join(parts)


def _surface_note(event: Event) -> str:
    op = event.surface_op
    if isinstance(op, dict):
        return f" [replaces {op['start']}..{op['end']}]"
    return ""


def _describe(event: Event) -> str:
    """A one-line summary of an event for the timeline."""
    d = event.data
    etype = event.type
    if etype == "turn/start":
        text = f"turn {d['turn']}"
    elif etype == "turn/end":
        text = f"turn {d['turn']} · {d['reason']['kind']}"
    elif etype in ("step/start", "step/end"):
        text = f"turn {d['turn']} step {d['step']}"
    elif etype in ("user/message", "context/message"):
        text = f"({d['source']['kind']}) {_excerpt(_blocks_text(d['content']))}"
    elif etype == "assistant/message":
        usage = d.get("usage")
        extra = f" · usage {encode_str(usage)}" if usage else ""
        cut = " · interrupted" if d.get("interrupted") else ""
        source = f"{d['source']['provider']}/{d['source']['model']}"
        text = f"{source}: {_excerpt(_blocks_text(d['content']), 60)}{cut}{extra}"
    elif etype == "tool/call":
        text = f"{d['call_id']} {d['name']}({_excerpt(d['arguments'], 50)})"
    elif etype == "tool/approval":
        verdict = "approved" if d["approved"] else "denied"
        reason = f": {_excerpt(d['reason'])}" if "reason" in d else ""
        text = f"{d['call_id']} {verdict} by {d['by']}{reason}"
    elif etype == "tool/result":
        flag = "error " if d["is_error"] else ""
        text = f"{d['call_id']} {flag}{_excerpt(_blocks_text(d['content']))}"
    elif etype == "request/header":
        config = d["header"]["config"]
        tools = len(d["header"].get("tools", ()))
        text = f"{d['reason']} · {config['provider']}/{config['model']} · {_count(tools, 'tool')}"
    elif etype == "request/header-delta":
        text = "changes " + ", ".join(k for k in ("system", "tools", "config", "prefix") if k in d)
    elif etype == "compact/summary":
        text = f"{d['provider']}/{d['model']} max_tokens {d['max_tokens']}"
    elif etype == "session/end-seed":
        text = " ".join(f"{k} {v}" for k, v in d.items())
    elif etype == "log/digest":
        text = f"first {d['bytes']} bytes · sha256 {d['sha256']}"
    else:
        text = _excerpt(encode_str(d)) if d else ""
    return text + _surface_note(event)


def _rows(events: Sequence[Event], chunks: bool) -> Iterable[tuple[str, str, str, str]]:
    """Timeline rows; runs of ``assistant/chunk`` fold into one row unless ``chunks``."""
    i = 0
    while i < len(events):
        event = events[i]
        if event.type == "assistant/chunk" and not chunks:
            j = i
            while j < len(events) and events[j].type == "assistant/chunk":
                j += 1
            run = events[i:j]
            kinds = Counter(chunk_kind(e) for e in run)
            detail = ", ".join(f"{kind} {n}" for kind, n in kinds.items())
            seqs = f"{run[0].seq}-{run[-1].seq}" if len(run) > 1 else str(run[0].seq)
            yield seqs, _clock(run[0].time), f"assistant/chunk ×{len(run)}", detail
            i = j
            continue
        if event.type == "assistant/chunk":
            detail = _excerpt(encode_str(event.data["chunk"]))
        else:
            detail = _describe(event)
        yield str(event.seq), _clock(event.time), event.type, detail
        i += 1


def _title(session: Session) -> str:
    info = session.info
    parts = [f"session {info.id}", f"created {_clock(info.created, date=True)} UTC"]
    if info.parent is not None and info.seed_length is None:
        parts.append(f"branched from {info.parent}")
    elif info.parent is not None:
        parts.append(f"forked from {info.parent} (seed {_count(info.seed_length or 0, 'event')})")
    if info.cwd is not None:
        parts.append(f"cwd {info.cwd}")
    return " · ".join(parts)


@click.command("show")
@click.argument("target", metavar="SESSION")
@store_option
@click.option("--chunks", is_flag=True, help="List every assistant/chunk event.")
def show_cmd(target: str, store: str | None, chunks: bool) -> None:
    """Print a session's timeline: seq, time (UTC), type and a short summary.

    SESSION is a session id in the store or the path of a session file. Runs
    of assistant/chunk events are shown as one counted row unless --chunks.
    """
    loaded = _load_target(target, store)
    session = loaded.session
    # Every cell holds logged text (model and tool output, names, the cwd):
    # no escape sequence in it reaches the terminal.
    table = Table(title=Text(terminal_text(_title(session))), title_justify="left", expand=False)
    table.add_column("seq", justify="right", no_wrap=True)
    table.add_column("time", no_wrap=True)
    table.add_column("type", no_wrap=True)
    table.add_column("summary")
    for row in _rows(session.events, chunks):
        table.add_row(*(Text(terminal_text(cell)) for cell in row))
    console = _console()
    console.print(table)
    digest = loaded.digest
    if digest is not None:
        # the checkpoint to keep elsewhere: `head -c BYTES FILE | sha256sum` gives it back
        after = f"; {_count(loaded.undigested, 'event')} after it" if loaded.undigested else ""
        console.print(
            Text(
                f"last digest: seq {digest.seq} · the first {digest.bytes} bytes of the log "
                f"have sha256 {digest.sha256}{after}"
            ),
            soft_wrap=True,
        )


COMMANDS: list[click.Command] = [verify_cmd, show_cmd]
