"""In-process transports: how ``make_client`` reaches a provider that runs in this process.

The llm layer keeps a registry and knows nothing of what registers in it; the
root package registers the emulator (lazily: its web stack loads when a client
needs it), so ``make_client(LlmCallConfig(provider="emulator", ...))`` works
as docs/api.md shows, and the llm package never imports the emulator.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest

from tapelog.agent import Agent
from tapelog.emulator import Emulator
from tapelog.llm import make_client, register_provider, unregister_provider
from tapelog.llm._api import register_in_process_transport
from tapelog.llm._clients import OpenAIClient
from tapelog.llm._in_process import in_process_transport, unregister_in_process_transport
from tapelog.log._api import LlmCallConfig, Session

NAME = "inproc-test"
CONFIG = LlmCallConfig(provider=NAME, model="m")


@pytest.fixture
def emulators() -> Iterator[list[Emulator]]:
    """A provider served by a fresh emulator per client; what each client got."""
    made: list[Emulator] = []

    def factory() -> httpx.AsyncBaseTransport:
        made.append(Emulator())
        return made[-1].transport()

    register_provider(NAME, family="openai", base_url="http://inproc-test/v1")
    register_in_process_transport(NAME, factory)
    yield made
    unregister_in_process_transport(NAME)
    unregister_provider(NAME)


async def test_a_client_without_a_base_url_talks_to_the_registered_transport(
    emulators: list[Emulator],
) -> None:
    client = make_client(CONFIG)
    assert isinstance(client, OpenAIClient)
    result = await Agent(Session(), client, config=CONFIG).run("hi")
    await client.aclose()
    assert result.text == "ok: hi"
    assert len(emulators) == 1
    assert [r.path for r in emulators[0].received] == ["/v1/chat/completions"]
    second = make_client(CONFIG)
    assert isinstance(second, OpenAIClient)
    await second.aclose()
    assert len(emulators) == 2  # each client its own: no state shared between clients


async def test_an_explicit_base_url_or_http_client_wins(emulators: list[Emulator]) -> None:
    by_url = make_client(CONFIG, base_url="http://127.0.0.1:9/v1")
    assert isinstance(by_url, OpenAIClient)
    assert by_url.base_url == "http://127.0.0.1:9/v1"
    await by_url.aclose()
    async with httpx.AsyncClient() as http:
        make_client(CONFIG, http_client=http)
    assert emulators == []  # the factory was never asked


def test_registering_replaces_and_unregistering_forgets() -> None:
    def first() -> httpx.AsyncBaseTransport:
        return httpx.MockTransport(lambda request: httpx.Response(500))

    def second() -> httpx.AsyncBaseTransport:
        return httpx.MockTransport(lambda request: httpx.Response(404))

    assert in_process_transport(NAME) is None
    register_in_process_transport(NAME, first)
    register_in_process_transport(NAME, second)
    try:
        transport = in_process_transport(NAME)
        assert isinstance(transport, httpx.MockTransport)
        assert transport.handle_request(httpx.Request("GET", "http://x/")).status_code == 404
    finally:
        unregister_in_process_transport(NAME)
    assert in_process_transport(NAME) is None
    unregister_in_process_transport(NAME)  # forgetting twice is no error


def test_the_emulator_loads_only_when_a_client_needs_it() -> None:
    """``import tapelog.llm`` registers the emulator without importing it; the
    first emulator client does, and answers in process (its host never resolves)."""
    code = (
        "import sys\n"
        "from tapelog.agent import Agent\n"
        "from tapelog.llm import make_client\n"
        "from tapelog import LlmCallConfig, Session\n"
        "assert 'tapelog.emulator' not in sys.modules\n"
        "config = LlmCallConfig(provider='emulator', model='emulator-1')\n"
        "agent = Agent(Session(), make_client(config), config=config)\n"
        "assert 'tapelog.emulator' in sys.modules\n"
        "assert agent.run_sync('hi').text == 'ok: hi'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
