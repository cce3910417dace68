"""``tapelog run --mcp`` / ``--mcp-config`` as a user runs them, against the loopback emulator."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner, Result

from tapelog.cli import cli
from tapelog.emulator import Emulator
from tapelog.log import encode

from ._servers import ENV_SERVER, TIME

TAPELOG = str(Path(sys.executable).with_name("tapelog"))
API_KEY = "sk-mcp-cli-SECRET-never-logged"
TOKEN = "mcp-env-TOKEN-7f3a9c-never-logged"


def _tapelog(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [TAPELOG, *args], env=env, capture_output=True, text=True, timeout=180, check=False
    )


def _invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), obj={"debug": False})


def _env(store: Path) -> dict[str, str]:
    return {**os.environ, "DEEPSEEK_API_KEY": API_KEY, "TAPELOG_STORE": str(store)}


def _provider(port: int) -> list[str]:
    return ["--provider", "deepseek", "--base-url", f"http://127.0.0.1:{port}/deepseek"]


def test_run_with_an_mcp_server_rebuilds_byte_for_byte(
    tmp_path: Path, loopback_emulator: tuple[Emulator, int]
) -> None:
    emulator, port = loopback_emulator
    emulator.push(
        {
            "tool_calls": [
                {
                    "name": "time__convert_time",
                    "arguments": encode(
                        {"source_timezone": "UTC", "time": "12:00", "target_timezone": "UTC"}
                    ).decode(),
                }
            ]
        },
        {"text": "Noon stays noon."},
    )
    store = tmp_path / "store"
    env = _env(store)
    server = f"time={TIME} --local-timezone UTC"
    run = _tapelog(
        "run", "Convert noon.", "--tools", "none", "--mcp", server, "--session", "m1",
        *_provider(port), env=env,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "Noon stays noon."
    assert "mcp: time offers 2 tools" in run.stderr
    assert "[completed] turn 1 · 2 step(s)" in run.stderr

    body = emulator.received[0].json()
    assert [t["function"]["name"] for t in body["tools"]] == [
        "time__convert_time",
        "time__get_current_time",
    ]
    second = emulator.received[1].json()["messages"]
    assert second[-1]["role"] == "tool"
    assert '"time_difference": "+0.0h"' in second[-1]["content"]

    out = tmp_path / "bodies"
    rebuilt = _tapelog("requests", "m1", "--out", str(out), env=env)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert [f.read_bytes() for f in sorted(out.iterdir())] == [r.body for r in emulator.received]


def test_a_bad_mcp_config_is_one_line_and_stores_nothing(tmp_path: Path) -> None:
    store = tmp_path / "store"
    config = tmp_path / "mcp.json"
    cases = {
        '{"mcpServers": {"time": {"command": ["mcp-server-time"]}}}': (
            "mcpServers.time.command must be a string, not a list"
        ),
        '{"servers": {}, "mcpServers": {}}': 'needs one "mcpServers" object',
        '{"mcpServers": {"a__b": {"command": "x"}}}': "MCP server name 'a__b' is not usable",
        '{"mcpServers": {"t": {"command": "x", "env": {"K": "${TAPELOG_NO_SUCH_VAR}"}}}}': (
            "mcpServers.t.env.K uses ${TAPELOG_NO_SUCH_VAR}, which is not set"
        ),
        '{"mcpServers": {"t": {"type": "sse", "url": "http://127.0.0.1:1/sse"}}}': (
            "the SSE transport is not supported"
        ),
        "{not json": "is not valid JSON",
    }
    for text, message in cases.items():
        config.write_text(text)
        result = _invoke("run", "hi", "--mcp-config", str(config), "--store", str(store))
        assert result.exit_code == 2, result.output
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, result.stderr
        assert lines[0].startswith(f"error: MCP config {str(config)!r}"), lines[0]
        assert message in lines[0]
    missing = _invoke("run", "hi", "--mcp", "nocommand=", "--store", str(store))
    assert missing.exit_code == 2
    assert missing.stderr.strip() == (
        "error: --mcp nocommand: the command is empty; give NAME=COMMAND"
    )
    dead = _invoke("run", "hi", "--mcp", "gone=tapelog-no-such-command", "--store", str(store))
    assert dead.exit_code == 2
    assert dead.stderr.strip().splitlines()[-1] == (
        "error: MCP server gone (tapelog-no-such-command) did not start: "
        "command not found: tapelog-no-such-command"
    )
    assert "Traceback" not in dead.stderr
    assert not store.exists() or not any(store.iterdir())


def test_a_server_env_secret_never_reaches_the_log_or_the_output(
    tmp_path: Path, loopback_emulator: tuple[Emulator, int]
) -> None:
    emulator, port = loopback_emulator
    emulator.push(
        {"tool_calls": [{"name": "env__whoami", "arguments": "{}"}]},
        {"tool_calls": [{"name": "env__fail", "arguments": "{}"}]},
        {"text": "I saw a token."},
    )
    config = tmp_path / "mcp.json"
    config.write_bytes(
        encode(
            {
                "mcpServers": {
                    "env": {
                        "command": sys.executable,
                        "args": [ENV_SERVER],
                        "env": {"API_TOKEN": "${TEST_MCP_TOKEN}"},
                    }
                }
            }
        )
    )
    store = tmp_path / "store"
    env = {**_env(store), "TEST_MCP_TOKEN": TOKEN}
    run = _tapelog(
        "run", "Who are you?", "--tools", "none", "--mcp-config", str(config),
        "--session", "s1", *_provider(port), env=env,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    log = (store / "s1.jsonl").read_bytes()
    assert b"I am using the token ***" in log  # the result, redacted
    assert b"Says the token (***)." in log  # the tool description in the header
    assert b"token *** was refused" in log  # the error
    for seen in (
        log,
        run.stdout.encode(),
        run.stderr.encode(),
        *(r.body for r in emulator.received),
    ):
        assert TOKEN.encode() not in seen
        assert API_KEY.encode() not in seen
