"""Running the real Claude Code CLI (tests/realagents, pinned) offline against a port.

Shared by the Claude Code tests: a temporary git repository to work in, a
temporary HOME for its config, and ``claude -p`` pointed at a proxy (or an
emulator) with a test key and no traffic of its own.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

CLAUDE = Path(__file__).parents[1] / "realagents" / "node_modules" / ".bin" / "claude"


def claude_dirs(root: Path) -> tuple[Path, Path]:
    """A fresh git repository and HOME under ``root``: (repo, home)."""
    repo, home = root / "repo", root / "home"
    repo.mkdir()
    home.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    return repo, home


def run_claude(repo: Path, home: Path, port: int, *args: str, allowed: str) -> str:
    """``claude -p ARGS`` in ``repo`` against ``http://127.0.0.1:port``, with only
    the ``allowed`` tools pre-approved; its output once it exits 0."""
    env = {
        **os.environ,
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}",
        "ANTHROPIC_API_KEY": "sk-ant-test-key",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
    }
    done = subprocess.run(
        [str(CLAUDE), "-p", *args, "--allowedTools", allowed],
        cwd=repo,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.strip()
