"""An agent from a model string: ``Agent("emulator")``, ``Agent("openai:gpt-4.1-mini")``.

The string names a provider and a model; the client and config follow from
it, keys come from the environment only, and a bad string or a missing key
is one readable sentence before anything is logged.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tapelog import LlmCallConfig, Session, TapelogError, rebuild_requests
from tapelog.agent import Agent
from tapelog.agent._model_string import config_for_model
from tapelog.llm import make_client


def test_emulator_string_runs_offline_and_logs_its_config() -> None:
    agent = Agent("emulator")
    result = agent.run_sync("hi")
    assert result.ok
    assert result.text == "ok: hi"
    assert agent.config == LlmCallConfig(provider="emulator", model="emulator-1")
    (rebuilt,) = rebuild_requests(agent.session)
    assert rebuilt.request.config.provider == "emulator"


def test_provider_and_model_give_the_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key-1234")
    agent = Agent("openai:gpt-4.1-mini")
    assert (agent.config.provider, agent.config.model) == ("openai", "gpt-4.1-mini")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-a-real-key")
    agent = Agent(Session(), model="anthropic:claude-sonnet-4-5")
    assert (agent.config.provider, agent.config.model) == ("anthropic", "claude-sonnet-4-5")
    # A model name may hold colons itself (Ollama tags): the provider is before the first.
    agent = Agent("ollama:llama3.2:3b")
    assert (agent.config.provider, agent.config.model) == ("ollama", "llama3.2:3b")


def test_a_missing_key_is_one_sentence_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    session = Session()
    with pytest.raises(TapelogError) as caught:
        Agent(session, model="openai:gpt-4.1-mini")
    message = str(caught.value)
    assert "OPENAI_API_KEY" in message
    assert "\n" not in message
    assert session.events == []  # nothing logged


@pytest.mark.parametrize(
    ("model", "says"),
    [
        ("nosuch:model-1", "'nosuch' is not a known provider"),
        ("openai:", "names no model"),
        ("gpt-4.1-mini", "'gpt-4.1-mini' is not a known provider"),
        ("", "is empty"),
    ],
)
def test_a_bad_model_string_is_one_sentence(model: str, says: str) -> None:
    with pytest.raises(TapelogError) as caught:
        Agent(model)
    message = str(caught.value)
    assert says in message
    assert "\n" not in message
    assert "provider:model" in message


def test_the_explicit_form_still_works_and_forms_do_not_mix() -> None:
    config = LlmCallConfig(provider="emulator", model="emulator-1")
    agent = Agent(Session(), make_client(config), config=config)
    assert agent.run_sync("x").ok
    with pytest.raises(TypeError, match="not both"):
        Agent(Session(), model="emulator", config=config)
    with pytest.raises(TypeError, match="config"):
        Agent(Session(), make_client(config))


_MODEL = st.text(
    alphabet=st.characters(codec="ascii", categories=("L", "N", "P")), min_size=1, max_size=40
)


@given(
    provider=st.sampled_from(["openai", "anthropic", "deepseek", "emulator", "ollama"]),
    model=_MODEL,
)
def test_a_model_string_is_provider_then_everything_after_the_first_colon(
    provider: str, model: str
) -> None:
    config = config_for_model(f"{provider}:{model}")
    assert (config.provider, config.model) == (provider, model)
