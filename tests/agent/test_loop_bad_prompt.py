"""A prompt the log cannot hold is refused before the turn opens."""

from __future__ import annotations

import pytest

from tapelog import JsonValueError
from tapelog.emulator import Emulator

from ._harness import agent_on


async def test_a_prompt_that_is_not_json_text_opens_no_turn() -> None:
    async with agent_on(Emulator()) as agent:
        with pytest.raises(JsonValueError, match="not valid UTF-8"):
            await agent.run("caf\udcff")
        assert agent.session.events == ()
        result = await agent.run("hi")
    assert result.turn == 1
