"""An MCP server's environment: its secrets are redacted, its ordinary words are not.

Every ``env`` value of an MCP config used to be registered as a secret, so
``"env": {"AGENT_ROLE": "assistant"}`` made every ``assistant`` in the log
``***``: the roles and event types too, and the session no longer loaded
(issue 15, item 10). Now a value is a secret when its name says so
(``API_TOKEN``) or it looks like a generated key, and never when it is one
word; and structure (types, roles, ids) is never redacted.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tapelog.emulator import Emulator
from tapelog.log import encode, redact
from tapelog.log._redact import forget_secrets
from tapelog.mcp import ServerSpec
from tapelog.store import JsonlStore
from tapelog.store._api import verify_jsonl

from ._servers import ENV_SERVER

TAPELOG = str(Path(sys.executable).with_name("tapelog"))
API_KEY = "sk-mcp-secrets-SECRET-never-logged"
TOKEN = "mcp-env-TOKEN-5d1c0b-never-logged"
GENERATED = "Zq4vR9kT2mX7pL0sW3nB"  # looks like a key, under a name that does not say so


@pytest.fixture(autouse=True)
def _no_secrets_left() -> Iterator[None]:
    forget_secrets()
    yield
    forget_secrets()


def test_a_value_is_a_secret_when_named_so_or_generated_never_a_word() -> None:
    ServerSpec(
        name="env",
        command="server",
        env={
            "AGENT_ROLE": "assistant",
            "MODE": "production-us-east",
            "LOG_DIR": "/var/log/agent-2024",
            "API_TOKEN": TOKEN,
            "SEED": GENERATED,
            "DATABASE_URL": "postgres://app:pw-Secret-991@db/app",
            "DB_PASSWORD": "postgres",  # one word: no secret even when named so
        },
    )
    text = (
        f"the assistant in production-us-east logs to /var/log/agent-2024; "
        f"{TOKEN} {GENERATED} pw-Secret-991 postgres"
    )
    assert redact(text) == (
        "the assistant in production-us-east logs to /var/log/agent-2024; *** *** *** postgres"
    )


def test_run_with_a_word_in_an_mcp_env_logs_a_session_that_loads(
    tmp_path: Path, loopback_emulator: tuple[Emulator, int]
) -> None:
    emulator, port = loopback_emulator
    emulator.push(
        {"tool_calls": [{"name": "env__whoami", "arguments": "{}"}]},
        {"text": "I am the assistant."},
    )
    config = tmp_path / "mcp.json"
    server = {
        "command": sys.executable,
        "args": [ENV_SERVER],
        "env": {"AGENT_ROLE": "assistant", "API_TOKEN": TOKEN},
    }
    config.write_bytes(encode({"mcpServers": {"env": server}}))
    store = tmp_path / "store"
    env = {**os.environ, "DEEPSEEK_API_KEY": API_KEY, "TAPELOG_STORE": str(store)}
    run = subprocess.run(
        [
            TAPELOG, "run", "Who are you?", "--tools", "none", "--mcp-config", str(config),
            "--session", "s1", "--provider", "deepseek",
            "--base-url", f"http://127.0.0.1:{port}/deepseek",
        ],
        env=env, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "I am the assistant."
    log = (store / "s1.jsonl").read_bytes()
    report = verify_jsonl(log, expected_id="s1")
    assert report.ok, [str(p.error) for p in report.problems]
    session = JsonlStore(store).load("s1").session
    types = [e.type for e in session.events]
    assert types.count("assistant/message") == 2
    assert b"I am the assistant." in log
    # the only redactions are the token's: in the result and the tool's description
    rest = log.replace(b"I am using the token ***", b"").replace(b"Says the token (***).", b"")
    assert b"***" not in rest
    assert b"I am using the token ***" in log  # the named secret is still redacted
    assert TOKEN.encode() not in log
