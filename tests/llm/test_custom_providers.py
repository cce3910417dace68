"""Registered providers: the log records their wire, so it rebuilds without the registry.

Through the API: an Anthropic-compatible provider registered as ``acme`` runs
a tool turn on the emulator; after it is unregistered (as in a process that
never registered it) every body the emulator received still rebuilds byte for
byte and the cache audit still runs. Table and property tests pin the
registry's validation, the pure ``wire_for`` and the presets' documented
dialect (docs/providers.md, "Registered providers and presets").
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent._harness import LONG_SYSTEM, SECRET, add, assert_bytes_rebuild
from tapelog import HeaderError, TapelogError
from tapelog.agent import Agent, Hooks, RetryPolicy
from tapelog.audit import cache_report
from tapelog.cache import DEFAULT_PROVIDER_CACHE
from tapelog.cache._api import provider_cache
from tapelog.emulator import Emulator
from tapelog.llm import (
    PRESETS,
    PROVIDERS,
    encode_request,
    load_providers,
    make_client,
    register_provider,
    unregister_provider,
)
from tapelog.llm._api import AnthropicWire, OpenAIWire, complete_config, known_providers, wire_for
from tapelog.log import decode, encode
from tapelog.log._api import EpochHeader, LlmCallConfig, Session, freeze
from tapelog.request import LlmRequest

from ._requests import READ_TOOL, call, text, tool_result

DOCS = Path(__file__).resolve().parents[2] / "docs" / "providers.md"


@pytest.fixture
def registered() -> Iterator[list[str]]:
    """Names the test registers; unregistered afterwards (the registry is per process)."""
    names: list[str] = []
    yield names
    for name in names:
        unregister_provider(name)


def _request(config: LlmCallConfig) -> LlmRequest:
    """A request with a tool round trip, under ``config``."""
    header = EpochHeader(config=config, system="Be brief.", tools=[READ_TOOL])
    messages = [
        text("user", "Read a.txt"),
        {"role": "assistant", "content": [call("c1")]},
        tool_result("c1", "hello"),
    ]
    return LlmRequest(header=header, messages=freeze(messages))


# --- end to end through the API ------------------------------------------------


async def test_an_anthropic_family_provider_round_trips_without_its_registration(
    registered: list[str],
) -> None:
    register_provider(
        "acme",
        family="anthropic",
        base_url="http://emulator/anthropic",
        api_key_env="ACME_API_KEY",
        key_required=True,
        cache_idle_lifetime_ms=120_000,
    )
    registered.append("acme")
    emulator = Emulator()
    emulator.push(
        {"tool_calls": [{"name": "add", "arguments": '{"a": 2, "b": 3}'}]},
        {"text": "It is 5."},
        {"text": "Still 5."},
    )
    # The user writes the config without any wire: the agent completes it.
    config = LlmCallConfig(provider="acme", model="acme-sonnet", max_tokens=256)
    async with httpx.AsyncClient(transport=emulator.transport(), timeout=30) as http:
        client = make_client(config, http_client=http, env={"ACME_API_KEY": SECRET})
        agent = Agent(
            Session(),
            client,
            config=config,
            system=LONG_SYSTEM,
            tools=[add],
            retry=RetryPolicy(base_delay=0.0),
            check=True,
        )
        first = await agent.run("What is 2 + 3?")
        second = await agent.run("And again?")
    assert (first.text, second.text) == ("It is 5.", "Still 5.")
    session = agent.session
    assert [r.path for r in emulator.received] == ["/anthropic/v1/messages"] * 3
    assert all(r.headers["x-api-key"] == "[redacted]" for r in emulator.received)
    header = next(e for e in session.events if e.type == "request/header")
    assert header.data["header"]["config"] == {
        "provider": "acme",
        "model": "acme-sonnet",
        "max_tokens": 256,
        "wire": {"family": "anthropic"},
    }
    sources = {
        e.data["source"]["provider"] for e in session.events if e.type == "assistant/message"
    }
    assert sources == {"acme"}
    assert SECRET.encode() not in b"".join(encode(e.to_json()) for e in session.events)
    # While registered, the audit uses the registered facts (the Anthropic rule
    # for this family); the emulator's /anthropic route keeps the same rule.
    report = cache_report(session)
    assert {row.rule for row in report.requests} == {"anthropic"}
    assert report.totals.cached_reported == report.totals.cached_expected > 0

    unregister_provider("acme")  # now this process has never heard of acme
    registered.clear()
    assert "acme" not in known_providers()
    assert_bytes_rebuild(session, emulator)
    fallback = cache_report(session)  # never crashes on an unknown provider
    assert {row.rule for row in fallback.requests} == {DEFAULT_PROVIDER_CACHE.rule}


async def test_a_request_hook_may_switch_to_a_registered_provider(
    registered: list[str],
) -> None:
    register_provider("myco", family="openai", dialect="openai", base_url="http://emulator/v1")
    registered.append("myco")
    emulator = Emulator()
    emulator.push({"text": "one"}, {"text": "two"})
    seen: list[LlmCallConfig] = []

    def hook(seed: LlmCallConfig) -> LlmCallConfig:
        seen.append(seed)
        return LlmCallConfig(provider="myco", model="m2", max_tokens=9)  # no wire given

    config = LlmCallConfig(provider="myco", model="m1")
    async with httpx.AsyncClient(transport=emulator.transport(), timeout=30) as http:
        agent = Agent(
            Session(),
            make_client(config, http_client=http),
            config=config,
            hooks=Hooks(request=hook),
            check=True,
        )
        await agent.run("hi")
        await agent.run("again")
    bodies = [decode(r.body) for r in emulator.received]
    # dialect "openai" is logged, so the rebuild keeps max_completion_tokens
    assert [b["model"] for b in bodies] == ["m2", "m2"]
    assert all(b["max_completion_tokens"] == 9 and "max_tokens" not in b for b in bodies)
    unregister_provider("myco")
    registered.clear()
    assert_bytes_rebuild(agent.session, emulator)


# --- the pure wire -------------------------------------------------------------


@pytest.mark.parametrize(
    ("wire", "expected"),
    [
        ({"family": "openai", "dialect": "compatible"}, OpenAIWire(dialect="compatible")),
        ({"family": "openai", "dialect": "openai"}, OpenAIWire(dialect="openai")),
        (
            {"family": "openai", "dialect": "deepseek", "reasoning_send_back": "never"},
            OpenAIWire(dialect="deepseek", send_back="never"),
        ),
        ({"family": "anthropic"}, AnthropicWire()),
    ],
)
def test_wire_for_reads_an_unknown_providers_wire_from_the_config(
    wire: dict[str, Any], expected: Any
) -> None:
    assert "nobody-registered-this" not in known_providers()
    config = LlmCallConfig(provider="nobody-registered-this", model="m", wire=wire)
    assert wire_for(config) == expected


@pytest.mark.parametrize(
    ("provider", "wire", "message"),
    [
        ("x", {}, "config.wire names no wire family"),
        ("x", {"family": "grpc"}, "config.wire.family must be 'openai' or 'anthropic'"),
        ("x", {"family": "openai"}, "config.wire.dialect must be one of"),
        ("x", {"family": "openai", "dialect": "vllm"}, "config.wire.dialect must be one of"),
        ("x", {"family": "anthropic", "dialect": "compatible"}, "for the openai family only"),
        ("x", {"family": "anthropic", "reasoning_send_back": "never"}, "does not read"),
        ("x", {"family": "openai", "dialect": "compatible", "colour": 1}, "does not read"),
        ("openai", {"family": "openai"}, "follows from its name"),
        ("openai", {"family": "anthropic"}, "follows from its name"),
        ("deepseek", {"dialect": "deepseek"}, "follows from its name"),
        ("deepseek", {"family": "openai", "dialect": "compatible"}, "follows from its name"),
        ("local", {"family": "openai", "dialect": "compatible"}, "follows from its name"),
    ],
)
def test_a_wire_the_config_does_not_name_fully_is_refused(
    provider: str, wire: dict[str, Any], message: str
) -> None:
    with pytest.raises(HeaderError, match=re.escape(message)):
        wire_for(LlmCallConfig(provider=provider, model="m", wire=wire))


def test_a_built_in_provider_may_repeat_its_own_wire_exactly() -> None:
    # A name that ever joins the built-in table keeps the logs written while
    # it was a registered provider valid.
    config = LlmCallConfig(
        provider="deepseek", model="m", wire={"family": "openai", "dialect": "deepseek"}
    )
    assert wire_for(config) == OpenAIWire(dialect="deepseek")
    assert wire_for(LlmCallConfig(provider="anthropic", model="m", wire={"family": "anthropic"}))


def test_complete_config_fills_in_the_registry_and_never_overrides_the_config(
    registered: list[str],
) -> None:
    register_provider("myco", family="openai", dialect="deepseek")
    registered.append("myco")
    plain = LlmCallConfig(provider="myco", model="m", wire={"reasoning_send_back": "never"})
    completed = complete_config(plain)
    # identity first, options after: one canonical form, so no spurious header delta
    assert list(completed.wire) == ["family", "dialect", "reasoning_send_back"]
    assert complete_config(completed) is completed
    own = LlmCallConfig(provider="myco", model="m", wire={"family": "anthropic"})
    assert complete_config(own) is own  # the log decides
    builtin = LlmCallConfig(provider="openai", model="m")
    assert complete_config(builtin) is builtin  # built-in logs are unchanged
    with pytest.raises(HeaderError, match=r"needs config\.wire\.family too"):
        complete_config(LlmCallConfig(provider="myco", model="m", wire={"dialect": "openai"}))
    with pytest.raises(HeaderError, match="'ghost' is not a known provider"):
        complete_config(LlmCallConfig(provider="ghost", model="m"))


_NAMES = st.text(alphabet=string.ascii_lowercase + string.digits + "._-", min_size=1, max_size=20)


@given(
    name=_NAMES.filter(lambda n: n[0].isalnum() and n not in PROVIDERS and n not in PRESETS),
    family_dialect=st.sampled_from(
        [
            ("openai", "openai"),
            ("openai", "deepseek"),
            ("openai", "compatible"),
            ("anthropic", None),
        ]
    ),
)
def test_a_registered_config_rebuilds_from_its_json_alone(
    name: str, family_dialect: tuple[str, str | None]
) -> None:
    family, dialect = family_dialect
    register_provider(name, family=family, dialect=dialect, replace=True)  # type: ignore[arg-type]
    try:
        live = complete_config(LlmCallConfig(provider=name, model="m", max_tokens=7))
        body = encode_request(_request(live))
    finally:
        unregister_provider(name)
    logged = LlmCallConfig.from_json(decode(encode(live.to_json())))
    assert encode_request(_request(logged)) == body
    assert wire_for(logged).name == (dialect or "anthropic")


# --- registry validation -------------------------------------------------------


@given(name=st.text(max_size=80), env=st.one_of(st.none(), st.text(max_size=40)))
def test_any_name_and_key_variable_register_or_fail_in_one_sentence(
    name: str, env: str | None
) -> None:
    valid_name = re.fullmatch(r"[a-z0-9][a-z0-9._-]{0,63}", name) is not None
    valid_env = env is None or re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,127}", env) is not None
    if not (valid_name and valid_env and name not in known_providers()):
        with pytest.raises(TapelogError) as info:
            register_provider(name, family="openai", api_key_env=env)
        message = str(info.value)
        assert "\n" not in message
        if valid_name and env is not None and len(env) >= 8 and env not in name:
            assert env not in message  # what may be a pasted key is never echoed
        return
    spec = register_provider(name, family="openai", api_key_env=env)
    try:
        assert spec.wire_identity() == {"family": "openai", "dialect": "compatible"}
        assert known_providers()[name] is spec
    finally:
        unregister_provider(name)


_PASTED_KEY = "sk_live_ABCDEF0123456789abcdef"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "MyCo", "family": "openai"}, "is not 1-64 lower-case letters"),
        ({"name": "-x", "family": "openai"}, "is not 1-64 lower-case letters"),
        ({"name": "a" * 65, "family": "openai"}, "is not 1-64 lower-case letters"),
        ({"name": "openai", "family": "openai"}, "is a built-in provider"),
        ({"name": "x", "family": "local"}, "family must be 'openai' or 'anthropic'"),
        ({"name": "x", "family": "openai", "dialect": "vllm"}, "dialect must be one of"),
        ({"name": "x", "family": "anthropic", "dialect": "openai"}, "has no dialect"),
        ({"name": "x", "family": "openai", "base_url": "localhost:8000"}, "http:// or https://"),
        (
            {"name": "x", "family": "openai", "base_url": "https://u:p@h.example/v1"},
            "must not contain credentials",
        ),
        ({"name": "x", "family": "openai", "api_key_env": "MY-KEY"}, "NAME of an environment"),
        ({"name": "x", "family": "openai", "key_required": True}, "key_required needs api_key_env"),
        ({"name": "x", "family": "openai", "default_model": " "}, "default_model must be"),
        ({"name": "x", "family": "openai", "context_window": 0}, "context_window must be"),
        ({"name": "x", "family": "openai", "context_window": True}, "context_window must be"),
        ({"name": "x", "family": "openai", "cache_rule": "lru"}, "cache_rule must be one of"),
        (
            {"name": "x", "family": "openai", "cache_idle_lifetime_ms": -5},
            "cache_idle_lifetime_ms must be",
        ),
    ],
)
def test_bad_registrations_are_one_sentence_and_register_nothing(
    kwargs: dict[str, Any], message: str
) -> None:
    before = dict(known_providers())
    name = kwargs.pop("name")
    with pytest.raises(TapelogError) as info:
        register_provider(name, **kwargs)
    text = str(info.value)
    assert message in text
    assert "\n" not in text
    assert dict(known_providers()) == before


def test_a_key_pasted_as_the_variable_name_is_not_echoed() -> None:
    with pytest.raises(TapelogError) as info:
        register_provider("x", family="openai", api_key_env=_PASTED_KEY + "-")
    assert _PASTED_KEY not in str(info.value)


def test_re_registering_needs_replace_unless_nothing_changes(registered: list[str]) -> None:
    first = register_provider("myco", family="openai", base_url="http://a.example/v1")
    registered.append("myco")
    assert register_provider("myco", family="openai", base_url="http://a.example/v1") == first
    with pytest.raises(TapelogError, match="already registered with other settings"):
        register_provider("myco", family="anthropic")
    assert register_provider("myco", family="anthropic", replace=True).family == "anthropic"
    with pytest.raises(TapelogError, match="already a preset with other settings"):
        register_provider("ollama", family="openai", base_url="http://gpu-box:11434/v1")
    with pytest.raises(TapelogError, match="built in and cannot be unregistered"):
        unregister_provider("openai")


def test_cache_facts_come_from_the_registry_else_the_documented_default(
    registered: list[str],
) -> None:
    register_provider("myco", family="openai", cache_idle_lifetime_ms=90_000)
    registered.append("myco")
    assert (provider_cache("myco").rule, provider_cache("myco").idle_lifetime_ms) == (
        "deepseek",
        90_000,
    )
    register_provider("claudish", family="anthropic")
    registered.append("claudish")
    assert provider_cache("claudish").rule == "anthropic"
    unregister_provider("myco")
    assert provider_cache("myco") is DEFAULT_PROVIDER_CACHE
    assert provider_cache("never-seen") is DEFAULT_PROVIDER_CACHE
    assert provider_cache("ollama").idle_lifetime_ms == 5 * 60_000  # keep_alive default


# --- providers files -----------------------------------------------------------

_GOOD = """
[providers.myco]
family = "openai"
base_url = "https://llm.myco.example/v1"
api_key_env = "MYCO_API_KEY"
key_required = true
default_model = "myco-large"
context_window = 128000
cache_idle_lifetime_ms = 300000

[providers.claudish]
family = "anthropic"
base_url = "http://127.0.0.1:9000"
"""


def test_a_providers_file_registers_each_entry(tmp_path: Path, registered: list[str]) -> None:
    path = tmp_path / "providers.toml"
    path.write_text(_GOOD)
    specs = load_providers(path)
    registered.extend(s.name for s in specs)
    assert [s.name for s in specs] == ["myco", "claudish"]
    myco = known_providers()["myco"]
    assert (myco.dialect, myco.api_key_env, myco.key_required, myco.context_window) == (
        "compatible",
        "MYCO_API_KEY",
        True,
        128_000,
    )
    assert known_providers()["claudish"].cache is not None
    assert provider_cache("claudish").rule == "anthropic"
    # Loading again (every CLI command does) replaces silently.
    assert load_providers(path) == specs


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[providers.myco\n", "is not valid TOML"),
        ("[myco]\nfamily = 'openai'\n", "unknown top-level key 'myco'"),
        ("providers = 3\n", "'providers' must be a table"),
        ("[providers]\nmyco = 'openai'\n", "[providers.myco] must be a table"),
        ("[providers.myco]\nbase_url = 'http://h/v1'\n", "needs family"),
        ("[providers.myco]\nfamily = 'openai'\ncolour = 'red'\n", "unknown field 'colour'"),
        ("[providers.myco]\nfamily = 'openai'\ncontext_window = '8k'\n", "must be an integer"),
        ("[providers.myco]\nfamily = 'openai'\nkey_required = 'yes'\n", "must be true or false"),
        ("[providers.myco]\nfamily = 'openai'\ndialect = 'vllm'\n", "dialect must be one of"),
        ("[providers.MyCo]\nfamily = 'openai'\n", "is not 1-64 lower-case letters"),
        ("[providers.openai]\nfamily = 'openai'\n", "is a built-in provider"),
        (f"[providers.myco]\nfamily = 'openai'\napi_key = '{_PASTED_KEY}'\n", "never reads a key"),
        (
            f"[providers.myco]\nfamily = 'openai'\napi_key_env = '{_PASTED_KEY}!'\n",
            "NAME of an environment",
        ),
    ],
)
def test_a_bad_providers_file_is_one_line_and_registers_nothing(
    tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "providers.toml"
    if content.startswith("[providers."):
        # A good entry first: a bad file must not register even that one.
        content = "[providers.early]\nfamily = 'openai'\n" + content
    path.write_text(content)
    before = dict(known_providers())
    with pytest.raises(TapelogError) as info:
        load_providers(path)
    line = str(info.value)
    assert line.startswith(f"providers file {path}: ")
    assert message in line
    assert "\n" not in line
    assert _PASTED_KEY not in line
    assert dict(known_providers()) == before


def test_a_missing_providers_file_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(TapelogError, match=r"providers file .*nope\.toml: cannot be read"):
        load_providers(tmp_path / "nope.toml")


# --- presets -------------------------------------------------------------------


def _documented_presets() -> dict[str, dict[str, str]]:
    """The preset table of docs/providers.md, by provider name."""
    text = DOCS.read_text(encoding="utf-8")
    section = text.split("### Presets", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, dict[str, str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 4 and cells[0].startswith("`") and cells[0] != "`provider`":
            name = cells[0].strip("`")
            rows[name] = {"wire": cells[1], "base_url": cells[2], "key": cells[3]}
    return rows


def test_the_presets_are_the_documented_ones() -> None:
    documented = _documented_presets()
    assert sorted(documented) == sorted(PRESETS)
    for name, spec in PRESETS.items():
        row = documented[name]
        assert row["wire"] == f"OpenAI, dialect `{spec.dialect}`"
        assert row["base_url"] == f"`{spec.base_url}`"
        required = "required" if spec.key_required else "sent only if set"
        assert row["key"] == f"`{spec.api_key_env}` ({required})"
        assert spec.default_model is None  # every preset asks for --model


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_a_preset_logs_and_serializes_with_its_documented_dialect(name: str) -> None:
    config = complete_config(LlmCallConfig(provider=name, model="some/model", max_tokens=64))
    assert config.to_json()["wire"] == {"family": "openai", "dialect": "compatible"}
    body = decode(encode_request(_request(config)))
    assert body["max_tokens"] == 64
    assert "max_completion_tokens" not in body
    assert body["stream_options"] == {"include_usage": True}
    # The rebuild needs no registry: the logged wire alone gives the same bytes.
    logged = LlmCallConfig.from_json(decode(encode(config.to_json())))
    assert encode_request(_request(logged)) == encode_request(_request(config))
