"""The provider table: wires from logged configs alone, clients with keys from the env."""

from __future__ import annotations

import httpx
import pytest

from tapelog import HeaderError, ProviderError
from tapelog.llm import PROVIDERS, make_client
from tapelog.llm._api import AnthropicWire, OpenAIWire, wire_for, wire_named
from tapelog.llm._clients import AnthropicClient, OpenAIClient
from tapelog.log._api import LlmCallConfig


def _config(provider: str) -> LlmCallConfig:
    return LlmCallConfig(provider=provider, model="m")


@pytest.mark.parametrize(
    ("provider", "name"),
    [
        ("openai", "openai"),
        ("deepseek", "deepseek"),
        ("compatible", "compatible"),
        ("emulator", "compatible"),
        ("local", "compatible"),
        ("anthropic", "anthropic"),
    ],
)
def test_wire_for_needs_only_the_config(provider: str, name: str) -> None:
    assert wire_for(_config(provider)).name == name


def test_unknown_provider_is_refused_with_the_known_ones() -> None:
    with pytest.raises(HeaderError) as info:
        make_client(_config("acme"))
    assert str(info.value) == (
        "config.provider 'acme' is not a known provider; use one of "
        "anthropic, compatible, deepseek, emulator, local, openai, a registered one "
        "(lmstudio, ollama, openrouter, together, vllm), or register it "
        "(tapelog.llm.register_provider or a providers file, docs/providers.md)."
    )
    # The pure rebuild path never asks the registry: it needs the logged wire.
    with pytest.raises(HeaderError, match=r"config\.wire names no wire family"):
        wire_for(_config("acme"))


def test_table_base_urls_and_key_variables() -> None:
    assert PROVIDERS["openai"].base_url == "https://api.openai.com/v1"
    assert PROVIDERS["deepseek"].base_url == "https://api.deepseek.com"
    assert PROVIDERS["anthropic"].base_url == "https://api.anthropic.com"
    assert PROVIDERS["compatible"].base_url is None
    assert PROVIDERS["emulator"].api_key_env is None
    keys = {name: spec.api_key_env for name, spec in PROVIDERS.items() if spec.key_required}
    assert keys == {
        "anthropic": "ANTHROPIC_API_KEY",
        "deepseek": "DEEPSEEK_API_KEY",
        "openai": "OPENAI_API_KEY",
    }


async def test_make_client_builds_each_family() -> None:
    http = httpx.AsyncClient()
    deepseek = make_client(_config("deepseek"), http_client=http, env={})
    assert isinstance(deepseek, OpenAIClient)
    assert deepseek.wire == OpenAIWire(dialect="deepseek")
    assert deepseek.base_url == "https://api.deepseek.com"
    anthropic = make_client(_config("anthropic"), http_client=http)
    assert isinstance(anthropic, AnthropicClient)
    assert anthropic.wire == AnthropicWire()
    emulator = make_client(_config("emulator"), http_client=http)
    assert isinstance(emulator, OpenAIClient)
    assert (emulator.base_url, emulator.key_required) == ("http://emulator/v1", False)
    custom = make_client(
        _config("compatible"), base_url="http://localhost:8000/v1/", http_client=http
    )
    assert isinstance(custom, OpenAIClient)
    assert custom.base_url == "http://localhost:8000/v1"
    await http.aclose()


def test_compatible_needs_a_base_url() -> None:
    with pytest.raises(ProviderError) as info:
        make_client(_config("compatible"))
    assert str(info.value) == (
        "The compatible provider needs a base URL (for example http://localhost:8000/v1); "
        "pass --base-url or base_url=."
    )


def test_wire_named_keeps_the_configs_openai_dialect() -> None:
    deepseek = LlmCallConfig(provider="deepseek", model="deepseek-chat")
    assert wire_named("openai", deepseek) == OpenAIWire(dialect="deepseek")
    assert wire_named("openai", _config("anthropic")) == OpenAIWire(dialect="openai")
    assert wire_named("anthropic", deepseek) == AnthropicWire()


def test_the_stop_string_option_sends_one_stop_sequence_as_a_string() -> None:
    from tapelog.llm import LlmRequest
    from tapelog.log import decode
    from tapelog.log._api import EpochHeader

    def body(stop: tuple[str, ...], wire: dict[str, object]) -> object:
        config = LlmCallConfig(provider="deepseek", model="m", stop=stop, wire=wire)
        request = LlmRequest(header=EpochHeader(config=config), messages=[])
        return decode(wire_for(config).encode_body(request))["stop"]

    assert body(("END",), {"stop_string": True}) == "END"
    assert body(("END",), {}) == ["END"]
    assert body(("A", "B"), {"stop_string": True}) == ["A", "B"]  # a string holds one
    with pytest.raises(HeaderError, match="stop_string must be true or false"):
        wire_for(LlmCallConfig(provider="deepseek", model="m", wire={"stop_string": "yes"}))
    responses = {"api": "responses", "stop_string": True}
    with pytest.raises(HeaderError, match="stop_string is for chat completions"):
        wire_for(LlmCallConfig(provider="openai", model="m", wire=responses))
