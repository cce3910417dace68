"""A log that ``verify`` accepts is a log every audit command reads, and the other way round.

``verify`` applies the payload rules the audits rely on and walks the requests
the way the audits walk them; anything an audit still cannot read becomes one
line that names the seq, never a traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tapelog import EventError, LogError
from tapelog.cli import cli
from tapelog.log import encode
from tapelog.log._api import EpochHeader, LlmCallConfig, Session
from tapelog.request._api import reading_seq
from tapelog.store import JsonlStore
from tapelog.store._format import header_line

AUDITS = (
    ("requests", "--json"),
    ("requests", "--one-shot", "--json"),
    ("cache", "--json"),
    ("diff", "1", "1"),
    ("report", "-o", "REPORT"),
)


def _session(*, header: bool = True) -> Session:
    s = Session("s1", created=1, clock=lambda: 2)
    config = LlmCallConfig(provider="emulator", model="echo")
    if header:
        s.append(
            "request/header", {"header": EpochHeader(config=config).to_json(), "reason": "initial"}
        )
    s.append("turn/start", {"turn": 1})
    text = [{"type": "text", "text": "hi"}]
    s.append("user/message", {"content": text, "source": {"kind": "user"}}, surface_op="append")
    s.append("step/start", {"turn": 1, "step": 1})
    s.append(
        "assistant/message",
        {
            "turn": 1,
            "step": 1,
            "content": text,
            "source": {"provider": "emulator", "model": "echo"},
            "usage": {"input": 3, "cache_read": 0, "cache_write": 0, "output": 1, "reasoning": 0},
        },
        surface_op="append",
    )
    s.append("step/end", {"turn": 1, "step": 1})
    s.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    return s


def _write(root: Path, lines: list[Any]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    from tapelog.log._api import SessionInfo

    body = header_line(SessionInfo(id="s1", created=1)) + b"\n"
    body += b"".join(encode(line) + b"\n" for line in lines)
    (root / "s1.jsonl").write_bytes(body)


def _run(root: Path, *args: str) -> Any:
    args = tuple(str(root / "r.html") if a == "REPORT" else a for a in args)
    return CliRunner().invoke(cli, [*args, "--store", str(root)], obj={"debug": False})


def _lines(session: Session) -> list[Any]:
    return [dict(e.to_json()) for e in session.events]


@pytest.mark.parametrize(
    ("where", "key", "value", "message"),
    [
        ("compact/start", "context_tokens", "6400", "context_tokens must be an integer"),
        ("assistant/message", "usage", {"input": "3"}, "data.usage.input must be"),
        ("compact/end", "ok", "yes", "data.ok must be a boolean"),
        ("step/end", "sent", "no", "data.sent must be a boolean"),
    ],
)
def test_values_an_audit_reads_are_checked_when_logged_and_loaded(
    tmp_path: Path, where: str, key: str, value: Any, message: str
) -> None:
    lines = _lines(_session())
    if where.startswith("compact/"):
        for etype in ("compact/start", "compact/end"):
            lines.append({"seq": len(lines), "time": 2, "type": etype, "data": {"id": "c1"}})
    target = next(line for line in lines if line["type"] == where)
    target["data"] = {**target["data"], key: value}
    with pytest.raises(EventError, match=message):
        Session.from_events(lines)
    _write(tmp_path, lines)
    verified = _run(tmp_path, "verify", "s1")
    assert verified.exit_code == 1
    assert message in verified.output
    for audit in AUDITS:
        result = _run(tmp_path, audit[0], "s1", *audit[1:])
        assert result.exit_code == 2, (audit, result.output)
        assert "Traceback" not in result.output
        assert len(result.output.strip().splitlines()) == 1


def test_a_sent_step_without_a_header_fails_verify_naming_its_seq(tmp_path: Path) -> None:
    _write(tmp_path, _lines(_session(header=False)))
    verified = _run(tmp_path, "verify", "s1")
    assert verified.exit_code == 1
    assert "seq 2" in verified.output
    assert "no request header" in verified.output
    for audit in AUDITS:
        result = _run(tmp_path, audit[0], "s1", *audit[1:])
        assert result.exit_code == 2, (audit, result.output)
        assert "seq 2" in result.output


def test_a_valid_log_passes_verify_and_every_audit(tmp_path: Path) -> None:
    session = _session()
    with JsonlStore(tmp_path).create(session):
        pass
    verified = _run(tmp_path, "verify", "s1")
    assert verified.exit_code == 0
    assert "1 request," in verified.output
    for audit in AUDITS:
        result = _run(tmp_path, audit[0], "s1", *audit[1:])
        assert result.exit_code == 0, (audit, result.output)


def test_an_unexpected_error_while_reading_names_the_seq() -> None:
    with pytest.raises(LogError, match=r"^seq 7: .*KeyError") as info, reading_seq(7):
        raise KeyError("usage")
    assert info.value.seq == 7
