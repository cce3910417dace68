"""Running the real Codex CLI (tests/realagents, pinned) offline in a temporary HOME.

Codex reads ``~/.codex/config.toml``; :func:`write_config` writes the exact
config docs/proxy.md ("Codex CLI") shows: a custom provider with
``wire_api = "responses"`` whose ``base_url`` is the emulator or the proxy and
whose key comes from ``env_key``. Codex then speaks HTTP + SSE to
``{base_url}/responses`` and needs nothing else from the network (update checks
and analytics off). Each run is ``codex exec`` in a temporary git repository.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

CODEX = Path(__file__).parent / "node_modules" / ".bin" / "codex"
KEY_VARIABLE = "TAPELOG_TEST_CODEX_KEY"
MODEL = "gpt-5.1-codex"

CONFIG = """\
model = "{model}"
model_provider = "tapelog"
check_for_update_on_startup = false

[model_providers.tapelog]
name = "tapelog"
base_url = "{base_url}"
wire_api = "responses"
env_key = "{key_variable}"

[analytics]
enabled = false
"""

# Turn 1: Codex runs its own exec_command tool, then answers; turn 2 (resume) again.
SCRIPT = [
    {
        "reasoning": "I will list the files with ls.",
        "tool_calls": [{"name": "exec_command", "arguments": '{"cmd": "ls"}'}],
    },
    {"text": "The repository holds notes.txt."},
    {
        "reasoning": "Read notes.txt.",
        "tool_calls": [{"name": "exec_command", "arguments": '{"cmd": "cat notes.txt"}'}],
    },
    {"text": "notes.txt says: remember the milk."},
]


@dataclass(frozen=True)
class CodexRun:
    returncode: int
    stdout: str
    stderr: str


class Codex:
    """Codex CLI with its own HOME and a git repository to work in."""

    def __init__(self, root: Path, base_url: str) -> None:
        self.home = root / "home"
        self.repo = root / "repo"
        (self.home / ".codex").mkdir(parents=True)
        self.repo.mkdir()
        (self.repo / "notes.txt").write_text("remember the milk\n")
        for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "init"]):
            subprocess.run(
                ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
                cwd=self.repo,
                check=True,
            )
        config = CONFIG.format(model=MODEL, base_url=base_url, key_variable=KEY_VARIABLE)
        (self.home / ".codex" / "config.toml").write_text(config)

    def exec(self, *args: str) -> CodexRun:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.home),
            KEY_VARIABLE: "sk-codex-test-key",
            "NO_COLOR": "1",
        }
        done = subprocess.run(
            [str(CODEX), "exec", *args],
            cwd=self.repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
        return CodexRun(done.returncode, done.stdout, done.stderr)
