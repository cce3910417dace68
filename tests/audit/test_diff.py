"""request_diff: header fields and history changes, each with the seqs that explain it."""

from __future__ import annotations

import pytest

from agent._harness import add, agent_on, shout
from tapelog import LlmCallConfig, LogError
from tapelog.agent import Hooks
from tapelog.audit import cache_report, request_diff
from tapelog.cli._audit_cmds import diff_text
from tapelog.emulator import Emulator
from tapelog.log._api import Session

from ._sessions import LogBuilder


async def _session() -> Session:
    emulator = Emulator(script=[{"text": "a"}, {"text": "b"}, {"text": "c"}])
    session = Session()
    warm: list[bool] = []

    def request(seed: LlmCallConfig) -> LlmCallConfig | None:
        return seed.replace(temperature=0.5) if warm else None

    hooks = Hooks(request=request)
    system = "One.\nTwo.\nThree."
    async with agent_on(
        emulator, session=session, system=system, tools=[add], hooks=hooks
    ) as agent:
        await agent.run("first")
        await agent.run("second")
        agent.add_tool(shout)
        agent.system = "One.\nTwo and a half.\nThree."
        warm.append(True)
        await agent.run("third")
    return session


async def test_a_header_delta_names_fields_tools_and_system_lines() -> None:
    session = await _session()
    diff = request_diff(session, 2, 3)
    delta = [e for e in session.events if e.type == "request/header-delta"]
    assert diff.header_seqs == tuple(e.seq for e in delta)
    assert diff.header.tools_added == ("shout",)
    assert diff.header.config == {"temperature": (None, 0.5)}
    assert diff.header.system == (
        "--- before",
        "+++ after",
        "@@ -1,3 +1,3 @@",
        " One.",
        "-Two.",
        "+Two and a half.",
        " Three.",
    )
    assert diff.header.system_lines == 1  # one line edited, as "line 2 changed" says
    assert diff.header.system_changed == "1 line changed"
    # the count, the table's label and the sentence agree
    text = diff_text(diff)
    assert "system prompt (1 line changed):" in text
    assert "system prompt line 2 edited: “Two.” → “Two and a half.”" in text
    [cause] = [c for c in cache_report(session).requests[2].causes if c.kind == "header-delta"]
    assert "system 1 line" in cause.label
    assert diff.header.fields() == ["config", "system", "tools"]
    data = diff.to_json()
    assert data["header"]["config"] == {"temperature": [None, 0.5]}
    assert data["header"]["seqs"] == [e.seq for e in delta]


async def test_appended_messages_are_listed_with_their_seqs() -> None:
    session = await _session()
    diff = request_diff(session, 1, 2)
    assert diff.header.empty
    assert diff.header_seqs == ()
    answer = next(e for e in session.events if e.type == "assistant/message")
    second = [e for e in session.events if e.type == "user/message"][1]
    assert diff.messages.common == 1
    assert diff.messages.appended == (answer.seq, second.seq)
    assert diff.messages.replaced == ()
    assert diff.message_seqs == (answer.seq, second.seq)
    assert (diff.a.messages, diff.b.messages) == (1, 3)


def test_compaction_and_trims_show_as_replacements() -> None:
    log = LogBuilder()
    log.user("Shout.")
    result = log.tool_round("c1", "x" * 500, header=True)
    log.answer("Done.")
    log.user("Again?")
    trim = log.trim(result)
    log.answer("Trimmed.")
    log.user("Summarise.")
    compaction = log.compact("c2", 1, trim.seq)
    log.answer("Compacted.")
    diff = request_diff(log.session, 2, 4)
    replaced = [(r.kind, r.by, r.replaced) for r in diff.messages.replaced]
    assert replaced[0] == ("trim", trim.seq, (result.seq,))
    assert replaced[1][:2] == ("compaction", compaction[2].seq)
    assert diff.messages.common == 0
    assert compaction[0].seq in diff.message_seqs
    assert trim.seq in diff.message_seqs


@pytest.mark.parametrize("bad", [0, 4, -1])
async def test_a_missing_request_is_refused_with_the_valid_range(bad: int) -> None:
    session = await _session()
    with pytest.raises(LogError) as info:
        request_diff(session, 1, bad)
    assert str(info.value) == (
        f"request {bad} does not exist: the session has 3 loop request(s); "
        "give indexes from 1 to 3 (see `tapelog requests`)."
    )
