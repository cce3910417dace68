"""tapelog cache and tapelog diff: output, JSON shape, exit codes and one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from agent._harness import add, agent_on, shout
from tapelog.audit import cache_report
from tapelog.cli import cli
from tapelog.cli._audit_cmds import cache_caption
from tapelog.emulator import Emulator
from tapelog.log import decode
from tapelog.log._api import Session
from tapelog.store import JsonlStore


async def _stored(tmp_path: Path) -> str:
    store = JsonlStore(tmp_path)
    session = Session("audited")
    emulator = Emulator(script=[{"text": "a"}, {"text": "b"}])
    with store.create(session) as writer:
        async with agent_on(emulator, session=session, tools=[add], writer=writer) as agent:
            await agent.run("one")
            agent.add_tool(shout)
            await agent.run("two")
    return session.id


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), obj={"debug": False})
    return result.exit_code, result.stdout, result.stderr


async def test_cache_prints_a_table_with_cause_labels(tmp_path: Path) -> None:
    sid = await _stored(tmp_path)
    code, out, _ = _run("cache", sid, "--store", str(tmp_path))
    assert code == 0
    assert "drop: tools +shout" in out
    assert "efficiency 100%" in out


async def test_cache_prints_the_bottom_line_first_and_a_caption_within_80_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid = await _stored(tmp_path)
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = _run("cache", sid, "--store", str(tmp_path))
    assert code == 0
    report = cache_report(JsonlStore(tmp_path).load(sid).session)
    assert out.splitlines()[0] == report.totals.bottom_line.sentence
    caption = cache_caption(report)
    assert all(len(line) <= 80 for line in caption.splitlines())
    for line in caption.splitlines():
        assert line.strip() in out  # not wrapped by the table


async def test_cache_json_is_the_documented_shape(tmp_path: Path) -> None:
    sid = await _stored(tmp_path)
    code, out, _ = _run("cache", sid, "--store", str(tmp_path), "--json")
    assert code == 0
    data = decode(out)
    assert list(data) == ["session", "requests", "totals"]
    assert data["session"] == sid
    assert [r["drop"] for r in data["requests"]] == [False, True]
    assert data["requests"][1]["causes"][0]["kind"] == "header-delta"


async def test_diff_prints_text_and_json(tmp_path: Path) -> None:
    sid = await _stored(tmp_path)
    code, out, _ = _run("diff", sid, "1", "2", "--store", str(tmp_path))
    assert code == 0
    assert "tools added: shout" in out
    assert "appended: seqs" in out
    code, out, _ = _run("diff", sid, "1", "2", "--store", str(tmp_path), "--json")
    assert code == 0
    data = decode(out)
    assert list(data) == ["session", "a", "b", "header", "messages"]
    assert list(data["header"]) == ["config", "tools", "system", "system_change", "prefix", "seqs"]
    assert list(data["messages"]) == [
        "common",
        "replaced",
        "appended",
        "dropped",
        "edits",
        "edits_total",
        "seqs",
    ]
    assert data["header"]["tools"]["added"] == ["shout"]


async def test_a_bad_index_exits_2_with_one_line(tmp_path: Path) -> None:
    sid = await _stored(tmp_path)
    code, out, err = _run("diff", sid, "1", "7", "--store", str(tmp_path))
    assert code == 2
    assert out == ""
    assert err == (
        "error: request 7 does not exist: the session has 2 loop request(s); "
        "give indexes from 1 to 2 (see `tapelog requests`).\n"
    )


def test_an_unknown_session_exits_2_with_one_line(tmp_path: Path) -> None:
    code, _, err = _run("cache", "nope", "--store", str(tmp_path))
    assert code == 2
    assert err.startswith("error: ")
    assert "nope" in err
    assert err.count("\n") == 1
