"""End to end over real HTTP: two processes run turns, a third rebuilds every body.

The bytes the loopback emulator received for every request equal
``tapelog requests --out`` output byte for byte, including the requests sent by
the second process, which resumed the session.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tapelog.emulator import Emulator
from tapelog.log import decode

TAPELOG = str(Path(sys.executable).with_name("tapelog"))
SECRET = "sk-e2e-SECRET-never-logged"

CASES = {
    "deepseek": ("/deepseek", "DEEPSEEK_API_KEY", "deepseek-chat"),
    "anthropic": ("/anthropic", "ANTHROPIC_API_KEY", "claude-sonnet-4-5"),
    "openai": ("/openai/v1", "OPENAI_API_KEY", "gpt-4.1-mini"),
}


def _tapelog(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [TAPELOG, *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.parametrize("provider", sorted(CASES))
def test_bodies_received_equal_requests_out(
    provider: str, tmp_path: Path, loopback_emulator: tuple[Emulator, int]
) -> None:
    emulator, port = loopback_emulator
    path, key_env, model = CASES[provider]
    emulator.push(
        {"tool_calls": [{"name": "list_dir", "arguments": '{"path": "."}'}]},
        {"text": "There is one file, a.txt."},
        {"tool_calls": [{"name": "read_file", "arguments": '{"path": "a.txt"}'}]},
        {"text": "It says hello."},
    )
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "a.txt").write_text("hello\n")
    env = {
        **os.environ,
        key_env: SECRET,
        "TAPELOG_STORE": str(tmp_path / "store"),
        "TAPELOG_CHECK": "1",
    }
    common = [
        "--session", "e2e-1", "--provider", provider, "--model", model,
        "--base-url", f"http://127.0.0.1:{port}{path}", "--workspace", str(workspace),
        "--system", "You look at files.",
    ]  # fmt: skip
    first = _tapelog("run", "What is in the workspace?", *common, env=env)
    assert first.returncode == 0, first.stderr
    assert "There is one file" in first.stdout
    assert "[completed] turn 1 · 2 step(s)" in first.stderr
    second = _tapelog("run", "Read it.", *common, env=env)
    assert second.returncode == 0, second.stderr
    assert "It says hello." in second.stdout

    out = tmp_path / "bodies"
    rebuilt = _tapelog("requests", "e2e-1", "--out", str(out), env=env)
    assert rebuilt.returncode == 0, rebuilt.stderr
    files = sorted(out.iterdir())
    assert [f.name for f in files] == ["0001.json", "0002.json", "0003.json", "0004.json"]
    received = [r.body for r in emulator.received]
    assert [f.read_bytes() for f in files] == received
    # the second process anchored its first request with a resume snapshot
    log = (tmp_path / "store" / "e2e-1.jsonl").read_bytes()
    assert b'"reason":"resume"' in log
    assert SECRET.encode() not in log
    # the resumed request extends the first process's last request
    third = decode(received[2])["messages"]
    assert len(third) > len(decode(received[1])["messages"])


def test_run_without_a_provider_uses_the_emulator_and_says_so(tmp_path: Path) -> None:
    env = {**os.environ, "TAPELOG_STORE": str(tmp_path)}
    env.pop("TAPELOG_PROVIDER", None)
    result = _tapelog("run", "hello there", "--tools", "none", env=env)
    assert result.returncode == 0, result.stderr
    assert "using the offline emulator" in result.stderr
    assert result.stdout.startswith("ok: hello there")


def test_fork_then_requests_json(tmp_path: Path) -> None:
    env = {**os.environ, "TAPELOG_STORE": str(tmp_path)}
    base = ["--tools", "none", "--session", "parent"]
    assert _tapelog("run", "one", *base, env=env).returncode == 0
    assert _tapelog("run", "two", *base, env=env).returncode == 0
    events = [decode(line) for line in (tmp_path / "parent.jsonl").read_bytes().splitlines()[1:]]
    first_end = next(e["seq"] for e in events if e["type"] == "turn/end")
    inside = next(e["seq"] for e in events if e["type"] == "step/start")
    refused = _tapelog("fork", "parent", "--at", str(inside), env=env)
    assert refused.returncode == 2
    assert "turn 1 is still open there" in refused.stderr
    assert "Traceback" not in refused.stderr
    forked = _tapelog("fork", "parent", "--at", str(first_end), "--id", "child", env=env)
    assert forked.returncode == 0, forked.stderr
    assert forked.stdout.strip() == "child"
    listing = _tapelog("requests", "child", "--json", env=env)
    assert listing.returncode == 0, listing.stderr
    rows = decode(listing.stdout)
    assert [r["index"] for r in rows] == [1]
    resumed = _tapelog("run", "three", "--tools", "none", "--session", "child", env=env)
    assert resumed.returncode == 0, resumed.stderr
    rows = decode(_tapelog("requests", "child", "--json", env=env).stdout)
    assert len(rows) == 2


def test_a_base_url_without_a_provider_means_an_openai_compatible_server(
    tmp_path: Path, loopback_emulator: tuple[Emulator, int]
) -> None:
    emulator, port = loopback_emulator
    env = {**os.environ, "TAPELOG_STORE": str(tmp_path)}
    env.pop("TAPELOG_PROVIDER", None)
    base = ["--tools", "none", "--session", "compat", "--base-url", f"http://127.0.0.1:{port}/v1"]
    missing = _tapelog("run", "hi", *base, env=env)
    assert missing.returncode == 2
    assert "provider 'compatible' has no default model; pass --model" in missing.stderr
    assert not (tmp_path / "compat.jsonl").exists(), "a usage error stores nothing"
    result = _tapelog("run", "hi", *base, "--model", "local-llama", env=env)
    assert result.returncode == 0, result.stderr
    assert "offline emulator" not in result.stderr
    assert len(emulator.received) == 1
    log = (tmp_path / "compat.jsonl").read_bytes()
    assert b'"provider":"compatible","model":"local-llama"' in log
