"""An API key that cannot go into an HTTP header is refused without quoting it.

A key copied with its newline (``export OPENAI_API_KEY=$(cat key.txt)`` with a
stray ``\\n``) used to reach h11, whose error message quotes the whole header,
so the key landed in the error message and in the logged ``turn/end``; a
non-ASCII key crashed with a ``UnicodeEncodeError`` traceback.
"""

from __future__ import annotations

import httpx
import pytest

from tapelog.agent import Agent
from tapelog.emulator import Emulator
from tapelog.llm import make_client
from tapelog.log._api import LlmCallConfig, Session

SECRET = "sk-hygiene-SECRET-7731"


@pytest.mark.parametrize(
    ("provider", "variable", "model", "base_url"),
    [
        ("openai", "OPENAI_API_KEY", "gpt-4.1-mini", "http://emulator/openai/v1"),
        ("anthropic", "ANTHROPIC_API_KEY", "claude-sonnet-4-5", "http://emulator/anthropic"),
    ],
)
@pytest.mark.parametrize("key", [SECRET + "\n", " " + SECRET, SECRET + "\u00e9"])
async def test_a_key_no_header_can_carry_is_refused_without_showing_it(
    provider: str, variable: str, model: str, base_url: str, key: str
) -> None:
    emulator = Emulator()
    config = LlmCallConfig(provider=provider, model=model)
    session = Session()
    async with httpx.AsyncClient(transport=emulator.transport()) as http:
        client = make_client(config, base_url=base_url, http_client=http, env={variable: key})
        result = await Agent(session, client, config=config).run("hi")
    assert result.reason["kind"] == "error"
    message = result.reason["error"]["message"]
    assert message == (
        f"The {provider} API key in {variable} contains whitespace, a control character or a "
        f"non-ASCII character (a newline copied with it?); set {variable} to the key alone."
    )
    assert emulator.received == []
    assert SECRET not in "".join(e.encode().decode() for e in session.events)
