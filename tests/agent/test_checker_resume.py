"""After a resume the checker starts from the load's fold (issue 20): the first
step costs what is new plus the load, and the check still refuses what the log
cannot explain."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import tapelog.log._fold as fold_module
from tapelog import ReconstructionError, Session
from tapelog.checker._api import RequestChecker
from tapelog.emulator import Emulator
from tapelog.llm._api import OpenAIWire
from tapelog.log._api import freeze
from tapelog.request import build_request
from tapelog.store import JsonlStore

from ._harness import add, agent_on

_CALLS = {"tool_calls": [{"name": "add", "arguments": '{"a": 1, "b": 2}'}]}


def _turns(session: Session) -> int:
    return sum(1 for event in session.events if event.type == "turn/start")


async def _stored(tmp_path: Path, turns: int) -> tuple[JsonlStore, str]:
    store = JsonlStore(tmp_path)
    emulator = Emulator(script=[_CALLS, {"text": "3"}] * turns)
    async with agent_on(emulator, tools=[add], check=True) as agent:
        with store.create(agent.session) as writer:
            agent.writer = writer
            for n in range(turns):
                await agent.run(f"add, round {n}")
    return store, agent.session.id


async def test_the_first_step_after_a_resume_projects_the_log_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, session_id = await _stored(tmp_path, 5)
    session, writer = store.open(session_id)
    loaded = len(session.surface)
    derived: list[int] = []
    derive = fold_module.derive_event_message

    def counting(event: Any) -> Any:
        derived.append(event.seq)
        return derive(event)

    monkeypatch.setattr(fold_module, "derive_event_message", counting)
    emulator = Emulator(script=[_CALLS, {"text": "3"}])
    with writer:
        async with agent_on(emulator, session=session, tools=[add], check=True) as agent:
            agent.writer = writer
            result = await agent.run("add once more")
    assert result.reason["kind"] == "completed"
    new = len(session.surface) - loaded
    assert new == 4
    # every loaded node once (shared by the live fold and the checker's), each new
    # one once per side; a shadow that re-projected the log would derive 2 x loaded
    assert len(derived) <= loaded + 2 * new, (len(derived), loaded, new)
    assert len([s for s in derived if s < session.surface[loaded]]) == loaded


async def test_a_forged_request_after_a_resume_is_still_refused(tmp_path: Path) -> None:
    store, session_id = await _stored(tmp_path, 3)
    session = store.load(session_id).session
    checker = RequestChecker(session)  # starts from the load's fold
    turn = _turns(session) + 1
    session.append("turn/start", {"turn": turn})
    user = {"content": [{"type": "text", "text": "again"}], "source": {"kind": "user"}}
    session.append("user/message", user, surface_op="append")
    nodes = session.history()
    step = session.append("step/start", {"turn": turn, "step": 1})
    assert session.header is not None
    request = build_request(
        header=session.header, nodes=nodes, session_id=session.id, boundary_seq=step.seq
    )
    wire = OpenAIWire(dialect="deepseek")
    extra = {"role": "user", "content": [{"type": "text", "text": "smuggled"}]}
    forged = replace(request, messages=freeze([*request.messages[:-1], extra]))
    with pytest.raises(ReconstructionError, match="messages differ"):
        checker.check(forged, wire.encode_body(forged))
    checker.check(request, wire.encode_body(request))


async def test_only_a_session_nothing_was_appended_to_lends_its_fold(tmp_path: Path) -> None:
    store, session_id = await _stored(tmp_path, 2)
    session = store.load(session_id).session
    fold = session.loaded_fold()
    assert fold is not None
    assert len(fold.events) == len(session)
    assert fold.history().message_list() == session.derive_messages()
    session.append("turn/start", {"turn": _turns(session) + 1})
    assert len(fold.events) == len(session) - 1  # a copy: the session's appends stay out
    assert session.loaded_fold() is None  # no longer only what the log said


async def test_the_shadow_reads_the_log_it_folds_and_keeps_no_list_of_its_own(
    tmp_path: Path,
) -> None:
    """The shadow folds the session's events on its own (surface, header,
    projection, wire pieces) but reads them from the session's own list: no
    reference per event held twice (issue 20 item 5), live and after a resume."""
    store, session_id = await _stored(tmp_path, 2)
    for session in (Session(), store.load(session_id).session):
        checker = RequestChecker(session)
        assert checker.shadow.items is session.events._items
        before = len(session)
        turn = _turns(session) + 1
        session.append("turn/start", {"turn": turn})
        user = {"content": [{"type": "text", "text": "hi"}], "source": {"kind": "user"}}
        session.append("user/message", user, surface_op="append")
        nodes = session.history()
        if session.header is None:
            continue  # a fresh session has no header to build a request from
        step = session.append("step/start", {"turn": turn, "step": 1})
        request = build_request(
            header=session.header, nodes=nodes, session_id=session.id, boundary_seq=step.seq
        )
        checker.check(request, OpenAIWire(dialect="deepseek").encode_body(request))
        assert checker.shadow.folded == len(session) > before
        assert checker.shadow.history().message_list() == session.derive_messages()
