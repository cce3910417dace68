"""Small frozen values every message repeats are one object per session (issue 20:
memory per history message): a prompt's ``source``, a reply's ``source``."""

from __future__ import annotations

from tapelog.emulator import Emulator

from ._harness import agent_on


async def test_every_message_of_a_role_shares_one_source_object() -> None:
    emulator = Emulator(script=[{"text": "one"}, {"text": "two"}, {"text": "three"}])
    async with agent_on(emulator) as agent:
        for n in range(3):
            await agent.run(f"prompt {n}")
    events = agent.session.events
    for etype in ("user/message", "assistant/message"):
        sources = [e.data["source"] for e in events if e.type == etype]
        assert len(sources) == 3
        assert all(source is sources[0] for source in sources), etype
    user = next(e for e in events if e.type == "user/message")
    assert user.data["source"] == {"kind": "user"}
