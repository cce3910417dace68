"""One event projects to one message object, whichever fold asks (issue 20: memory).

The session's fold and the invariant checker's shadow fold each project the
same logged surface events; the projection is pure and its result frozen, so
the message is made once per event and shared, not held twice per history
message. Folding stays each fold's own (order, replaces, its own lists).
"""

from __future__ import annotations

from tapelog import Session
from tapelog.log._api import LogFold, derive_event_message


def _session() -> Session:
    session = Session("p", clock=lambda: 1)
    session.append(
        "user/message",
        {"content": [{"type": "text", "text": "hi"}], "source": {"kind": "user"}},
        surface_op="append",
    )
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    content = [{"type": "tool_call", "id": "c1", "name": "read", "arguments": "{}"}]
    source = {"provider": "openai", "model": "m"}
    session.append(
        "assistant/message",
        {"turn": 1, "step": 1, "content": content, "source": source},
        surface_op="append",
    )
    result = {"turn": 1, "step": 1, "call_id": "c1", "content": "x", "is_error": False}
    session.append("tool/result", result, surface_op="append")
    return session


def test_two_folds_of_one_log_share_each_message() -> None:
    session = _session()
    shadow = LogFold()
    for event in session.events:
        shadow.apply(event)
    ours, theirs = session.history().message_list(), shadow.history().message_list()
    assert ours == theirs
    assert len(ours) == 3
    assert all(a is b for a, b in zip(ours, theirs, strict=True))


def test_the_shared_message_is_what_the_event_projects_to() -> None:
    for event in _session().events:
        first = derive_event_message(event)
        assert derive_event_message(event) is first
        if event.surface_op is None:
            assert first is None
