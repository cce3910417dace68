"""Counts read right ("1 turn", not "1 turns") and the report names no "(seq -)".

What ``verify``, ``show`` and the HTML report print is read by people; a
singular count with a plural noun, or a placeholder seq in parentheses, makes
them wonder what went wrong.
"""

from __future__ import annotations

import asyncio
import re
from html import unescape
from pathlib import Path

import click
import httpx
import pytest
from click.testing import CliRunner, Result

from agent._harness import add, shout
from tapelog.agent import Agent
from tapelog.audit import cache_report, render_report
from tapelog.cli import cli
from tapelog.emulator import Emulator
from tapelog.llm import make_client
from tapelog.log._api import LlmCallConfig, Session
from tapelog.store import JsonlStore
from tapelog.store._verify import LogStats

# long enough for a few 64-token cache units of the deepseek rule the emulator uses
SYSTEM = "\n".join(f"Rule {i}: answer carefully and cite the tool output." for i in range(40))


def _invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), obj={"debug": False})


async def _one_tool_session(
    store: JsonlStore, *, turns: int, reset_cache: bool = False, add_tool: bool = False
) -> str:
    """A session of ``turns`` turns offering one tool. Before the last turn,
    ``reset_cache`` empties the emulator's cache (a drop no logged event
    explains) and ``add_tool`` adds a second tool (a logged header delta)."""
    emulator = Emulator()
    config = LlmCallConfig(provider="emulator", model="emulator-1")
    session = Session("one-tool")
    with store.create(session) as writer:
        async with httpx.AsyncClient(transport=emulator.transport()) as http:
            client = make_client(config, http_client=http)
            agent = Agent(session, client, config=config, system=SYSTEM, tools=[add], writer=writer)
            for turn in range(turns):
                if reset_cache and turn == turns - 1:
                    emulator.reset_cache()
                if add_tool and turn == turns - 1:
                    agent.add_tool(shout)
                await agent.run(f"Question {turn + 1}.")
    return session.id


def test_log_stats_count_in_the_singular_and_the_plural() -> None:
    one = LogStats(events=1, turns=1, requests=1, header_snapshots=1, header_deltas=1)
    assert str(one) == "1 event, 1 turn, 1 request, 1 header snapshot, 1 header delta"
    many = LogStats(events=12, turns=2, requests=0, header_snapshots=3, header_deltas=0)
    assert str(many) == "12 events, 2 turns, 0 requests, 3 header snapshots, 0 header deltas"


def test_verify_and_show_of_a_one_turn_session(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    session_id = asyncio.run(_one_tool_session(store, turns=1))
    events = len(store.load(session_id).session.events)

    verified = _invoke("verify", session_id, "--store", str(tmp_path))
    assert verified.exit_code == 0, verified.output
    assert verified.stdout == (
        f"ok: {session_id}: {events} events, 1 turn, 1 request, 1 header snapshot, "
        "0 header deltas\n"
    )

    shown = _invoke("show", session_id, "--store", str(tmp_path))
    assert shown.exit_code == 0, shown.output
    assert re.search(r"initial · emulator/emulator-1 · 1 tool\s+│", shown.stdout)

    at = events - 1  # the turn/end
    forked = _invoke("fork", session_id, "--at", str(at), "--id", "child", "--store", str(tmp_path))
    assert forked.exit_code == 0, forked.output
    child = _invoke("show", "child", "--store", str(tmp_path))
    assert child.exit_code == 0, child.output
    assert f"forked from {session_id} (seed {events} events)" in " ".join(child.stdout.split())
    with store.create(Session("seedling", parent=session_id, seed_length=1)):
        pass
    seedling = _invoke("show", "seedling", "--store", str(tmp_path))
    assert seedling.exit_code == 0, seedling.output
    assert f"forked from {session_id} (seed 1 event)" in " ".join(seedling.stdout.split())


@pytest.mark.parametrize(
    ("extra", "tail"), [(1, "... and 1 more problem"), (2, "... and 2 more problems")]
)
def test_verify_counts_the_problems_it_does_not_list(tmp_path: Path, extra: int, tail: str) -> None:
    store = JsonlStore(tmp_path)
    session_id = asyncio.run(_one_tool_session(store, turns=1))
    path = store.path(session_id)
    lines = path.read_bytes().splitlines(keepends=True)
    # every event line after the header broken: one problem each
    broken = [lines[0]] + [b"{not json\n"] * (50 + extra)
    path.write_bytes(b"".join(broken))
    result = _invoke("verify", str(path))
    assert result.exit_code == 1
    out = result.stdout.splitlines()
    assert out[-2] == f"  {tail}"
    assert out[-1] == f"{path}: invalid ({50 + extra} problems)"


def test_the_report_names_seqs_only_for_causes_the_log_explains(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    session_id = asyncio.run(_one_tool_session(store, turns=2, reset_cache=True))
    session = store.load(session_id).session
    # the emptied cache: the second turn's request cached less than the rule expects,
    # and no event in the log says why
    [dropped] = [r for r in cache_report(session).requests if r.drop]
    assert [c.kind for c in dropped.causes] == ["unexplained"]
    assert dropped.causes[0].seqs == ()

    page = render_report(session)
    breaks = page.split('<table class="breaks">', 1)[1].split("</table>", 1)[0]
    cells = [unescape(c) for c in re.findall(r"<td>([^<]*)</td>", breaks)]
    assert "unexplained: reported below expected" in cells
    assert "(seq" not in breaks
    assert " · 2 turns · " in page


def test_the_report_of_one_turn_says_turn(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    session_id = asyncio.run(_one_tool_session(store, turns=1))
    page = render_report(store.load(session_id).session)
    assert " · 1 turn · " in page


def test_the_report_names_the_seq_of_a_logged_cause(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    session_id = asyncio.run(_one_tool_session(store, turns=2, add_tool=True))
    session = store.load(session_id).session
    [delta] = [e.seq for e in session.events if e.type == "request/header-delta"]
    page = render_report(session)
    breaks = page.split('<table class="breaks">', 1)[1].split("</table>", 1)[0]
    assert f"tools +shout (seq {delta})" in unescape(breaks)


def test_the_report_says_the_bottom_line_before_the_cards(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    session_id = asyncio.run(_one_tool_session(store, turns=2, reset_cache=True))
    session = store.load(session_id).session
    line = cache_report(session).totals.bottom_line
    assert line.lost_tokens > 0
    assert line.sentence.endswith("in 1 break: all from causes the log does not show.")
    page = render_report(session)
    found = re.search(r'<p class="bottom-line">([^<]*)</p>', page)
    assert found is not None
    assert unescape(found.group(1)) == line.sentence
    assert page.index('class="bottom-line"') < page.index('class="cards"')


@pytest.mark.parametrize("name", sorted(cli.commands))
def test_every_command_help_reads_as_text_and_describes_every_option(name: str) -> None:
    """No raw reStructuredText in ``--help``, every option described, and a session
    argument is called SESSION everywhere (``requests``, ``fork`` as ``cache``)."""
    command = cli.commands[name]
    result = _invoke(name, "--help")
    assert result.exit_code == 0
    assert "``" not in result.output
    for param in command.params:
        if isinstance(param, click.Option) and param.name != "help":
            assert param.help, f"{name} {param.opts[0]} has no description"
    assert "TARGET" not in result.output
    if name in ("requests", "fork", "cache", "diff", "report", "show"):
        assert re.search(rf"Usage: \S+ {name} \[OPTIONS\] SESSION\b", result.output)
