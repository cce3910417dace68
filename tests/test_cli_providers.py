"""A provider from a providers file, end to end over real HTTP, and the CLI's provider wiring.

The acceptance test: ``myco`` (an OpenAI-compatible provider that exists only
in a TOML file) runs two turns with tools against the emulator on a loopback
port, the second from another process that gets the file by ``--providers``.
Then processes that have only the store -- no providers file, no key --
rebuild every body byte for byte (``requests``), verify the log, audit the
cache and write the report.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from tapelog.cli import cli
from tapelog.cli._providers import load_cli_providers
from tapelog.cli._setup import resolve_provider
from tapelog.emulator import Emulator
from tapelog.llm import unregister_provider
from tapelog.llm._api import known_providers
from tapelog.log import decode, redact
from tapelog.log._api import Session

TAPELOG = str(Path(sys.executable).with_name("tapelog"))
SECRET = "sk-myco-SECRET-never-logged-0042"

PROVIDERS_TOML = """
[providers.myco]
family = "openai"
dialect = "compatible"
api_key_env = "MYCO_API_KEY"
key_required = true
default_model = "myco-1"
context_window = 64000
cache_idle_lifetime_ms = 600000
"""


def _tapelog(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [TAPELOG, *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def _bare_env(tmp_path: Path) -> dict[str, str]:
    """The environment with no provider settings: no providers file, no key."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TAPELOG_")}
    env.pop("MYCO_API_KEY", None)
    config_home = tmp_path / "config-home"
    config_home.mkdir(exist_ok=True)
    env["XDG_CONFIG_HOME"] = str(config_home)  # no ~/.config/tapelog/providers.toml either
    env["TAPELOG_STORE"] = str(tmp_path / "store")
    return env


def test_a_registered_provider_round_trips_through_run_requests_cache_and_report(
    tmp_path: Path, loopback_emulator: tuple[Emulator, int]
) -> None:
    emulator, port = loopback_emulator
    emulator.push(
        {"tool_calls": [{"name": "list_dir", "arguments": '{"path": "."}'}]},
        {"text": "There is one file, a.txt."},
        {"tool_calls": [{"name": "read_file", "arguments": '{"path": "a.txt"}'}]},
        {"text": "It says hello."},
    )
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "a.txt").write_text("hello\n")
    providers = tmp_path / "providers.toml"
    providers.write_text(PROVIDERS_TOML)
    bare = _bare_env(tmp_path)
    common = [
        "--session", "custom-1", "--base-url", f"http://127.0.0.1:{port}/v1",
        "--workspace", str(workspace), "--system", "You look at files.",
    ]  # fmt: skip

    # 1. The file from the environment; no --model: the registered default.
    env = {**bare, "TAPELOG_PROVIDERS": str(providers), "MYCO_API_KEY": SECRET}
    first = _tapelog("run", "What is in the workspace?", "--provider", "myco", *common, env=env)
    assert first.returncode == 0, first.stderr
    assert "There is one file" in first.stdout
    # 2. Another process, the file by --providers; the session's provider is resumed.
    env = {**bare, "MYCO_API_KEY": SECRET}
    second = _tapelog("run", "Read it.", "--providers", str(providers), *common, env=env)
    assert second.returncode == 0, second.stderr
    assert "It says hello." in second.stdout

    received = emulator.received
    assert [r.path for r in received] == ["/v1/chat/completions"] * 4
    assert all(r.headers["authorization"] == "[redacted]" for r in received)  # the key was sent
    assert {decode(r.body)["model"] for r in received} == {"myco-1"}
    log = (tmp_path / "store" / "custom-1.jsonl").read_bytes()
    assert SECRET.encode() not in log
    assert b'"wire":{"family":"openai","dialect":"compatible"}' in log

    # 3. Processes with only the log: no providers file, no key, no registration.
    out = tmp_path / "bodies"
    rebuilt = _tapelog("requests", "custom-1", "--out", str(out), env=bare)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert [f.read_bytes() for f in sorted(out.iterdir())] == [r.body for r in received]
    rows = decode(_tapelog("requests", "custom-1", "--json", env=bare).stdout)
    assert {row["provider"] for row in rows} == {"myco"}
    elsewhere = _tapelog("requests", "custom-1", "--wire", "anthropic", "--json", env=bare)
    assert elsewhere.returncode == 0, elsewhere.stderr  # the same log on the other family
    verified = _tapelog("verify", "custom-1", env=bare)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    cache = _tapelog("cache", "custom-1", "--json", env=bare)
    assert cache.returncode == 0, cache.stderr
    audit = decode(cache.stdout)
    assert [row["rule"] for row in audit["requests"]] == ["deepseek"] * 4
    assert audit["totals"]["cached_reported"] > 0
    report = tmp_path / "report.html"
    written = _tapelog("report", "custom-1", "-o", str(report), env=bare)
    assert written.returncode == 0, written.stderr
    assert "myco" in report.read_text(encoding="utf-8")


# --- the CLI's provider wiring, in process -----------------------------------------


@pytest.fixture
def cli_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    """An environment for in-process runs; providers they register are forgotten after."""
    before = set(known_providers())
    config_home = tmp_path / "config-home"
    config_home.mkdir()
    yield {
        "XDG_CONFIG_HOME": str(config_home),
        "TAPELOG_STORE": str(tmp_path / "store"),
        "TAPELOG_PROVIDER": "",
        "TAPELOG_PROVIDERS": "",
        "MYCO_API_KEY": "",
    }
    for name in set(known_providers()) - before:
        unregister_provider(name)


def _invoke(*args: str, env: dict[str, str]) -> Result:
    return CliRunner().invoke(cli, list(args), obj={"debug": False}, env=env)


def test_a_missing_registered_key_fails_before_anything_is_stored(
    tmp_path: Path, cli_env: dict[str, str]
) -> None:
    providers = tmp_path / "providers.toml"
    providers.write_text(PROVIDERS_TOML)
    result = _invoke(
        "run", "hi", "--provider", "myco", "--base-url", "http://127.0.0.1:9/v1",
        "--providers", str(providers), env=cli_env,
    )  # fmt: skip
    assert result.exit_code == 1
    assert result.stderr.startswith(
        "error: The myco provider needs an API key: set MYCO_API_KEY in the environment"
    )
    assert not (tmp_path / "store").exists() or not list((tmp_path / "store").iterdir())


def test_a_preset_without_a_model_asks_for_one(cli_env: dict[str, str]) -> None:
    result = _invoke("run", "hi", "--provider", "ollama", env=cli_env)
    assert result.exit_code == 2
    assert "provider 'ollama' has no default model; pass --model" in result.stderr


def test_an_unknown_provider_names_the_presets_and_the_providers_file(
    cli_env: dict[str, str],
) -> None:
    result = _invoke("run", "hi", "--provider", "myco", env=cli_env)
    assert result.exit_code == 2
    message = " ".join(result.stderr.split())
    assert "'myco' is not a known provider" in message
    assert "ollama, openai, openrouter, together, vllm" in message
    assert "register it in a providers file" in message


@pytest.mark.parametrize("where", ["env", "option"])
def test_a_bad_providers_file_is_one_error_line(
    tmp_path: Path, cli_env: dict[str, str], where: str
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[providers.myco]\nfamily = 'openai'\napi_key = 'sk-pasted-1234567890'\n")
    if where == "env":
        result = _invoke("sessions", env={**cli_env, "TAPELOG_PROVIDERS": str(bad)})
    else:
        result = _invoke("run", "hi", "--providers", str(bad), env=cli_env)
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"error: providers file {bad}: [providers.myco] has the field")
    assert "sk-pasted" not in result.stderr
    assert "myco" not in known_providers()


def test_the_default_providers_file_is_read_when_it_exists(
    cli_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = Path(cli_env["XDG_CONFIG_HOME"]) / "tapelog" / "providers.toml"
    path.parent.mkdir()
    path.write_text(PROVIDERS_TOML)
    for name, value in cli_env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("MYCO_API_KEY", SECRET)
    load_cli_providers()
    assert known_providers()["myco"].default_model == "myco-1"
    # its key variable is a secret from the start, before any client reads it
    assert redact(f"echo {SECRET}") == "echo ***"


async def test_a_registered_context_window_turns_on_compaction(
    tmp_path: Path, cli_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "providers.toml"
    path.write_text(PROVIDERS_TOML)
    monkeypatch.setenv("TAPELOG_PROVIDERS", str(path))
    monkeypatch.delenv("TAPELOG_PROVIDER", raising=False)
    load_cli_providers()
    setup = resolve_provider(
        provider="myco", model=None, base_url="http://127.0.0.1:9/v1", session=Session()
    )
    await setup.client.aclose()  # type: ignore[attr-defined]
    assert setup.compaction is not None
    assert setup.compaction.context_window == 64_000
    assert setup.config.to_json()["wire"] == {"family": "openai", "dialect": "compatible"}
    builtin = resolve_provider(provider="emulator", model=None, base_url=None, session=Session())
    await builtin.aclose()
    assert builtin.compaction is None
