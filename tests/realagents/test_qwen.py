"""Qwen Code (0.24.4) through ``tapelog proxy --upstream deepseek``, offline.

``qwen -p "Say hello"`` sends two requests from two agents: the main agent
(its own system prompt and tools), then its memory extraction subagent, whose
history is the main conversation's first exchange under another system prompt
and another tool set. The proxy keeps each in its own session, the subagent's
linked to the main one, and the main session's audit shows no break.

Qwen Code reads ``~/.qwen/settings.json``: the ``openai`` auth type makes it an
OpenAI-compatible client of ``OPENAI_BASE_URL`` with ``OPENAI_API_KEY`` and
``OPENAI_MODEL`` (usage statistics off, so it needs nothing else).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from click.testing import CliRunner

from proxy._helpers import assert_rebuilds, serve, sessions_in, upstream_for
from tapelog.audit import cache_report
from tapelog.cli import cli
from tapelog.emulator import Emulator
from tapelog.log import decode
from tapelog.log._api import encode_str
from tapelog.proxy import Proxy
from tapelog.store import JsonlStore

QWEN = Path(__file__).parent / "node_modules" / ".bin" / "qwen"
SETTINGS = {
    "security": {"auth": {"selectedType": "openai"}},
    "privacy": {"usageStatisticsEnabled": False},
}


def _qwen(root: Path, base_url: str, prompt: str) -> subprocess.CompletedProcess[str]:
    home, work = root / "home", root / "work"
    (home / ".qwen").mkdir(parents=True)
    work.mkdir()
    (home / ".qwen" / "settings.json").write_text(encode_str(SETTINGS))
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "OPENAI_API_KEY": "sk-qwen-test-key",
        "OPENAI_BASE_URL": base_url,
        "OPENAI_MODEL": "deepseek-chat",
        "NO_COLOR": "1",
    }
    return subprocess.run(
        [str(QWEN), "-p", prompt],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def test_qwen_code_main_agent_and_memory_subagent_are_two_linked_sessions(
    tmp_path: Path,
) -> None:
    emu = Emulator()
    store = tmp_path / "sessions"
    lines: list[str] = []
    with serve(emu.app) as emu_port:
        proxy = Proxy(
            upstream_for("deepseek", emu_port),
            JsonlStore(store),
            on_request=lambda summary: lines.append(summary.line()),
        )
        with serve(proxy.app) as port:
            done = _qwen(tmp_path, f"http://127.0.0.1:{port}/v1", "Say hello")
    assert done.returncode == 0, done.stderr
    assert [r.status for r in emu.received] == [200, 200]
    sessions = sessions_in(store)  # each passes verify first
    assert_rebuilds(sessions, emu)
    assert len(sessions) == 2
    (sub,) = [s for s in sessions.values() if s.info.parent is not None]
    main = sessions[sub.info.parent or ""]
    assert main.info.parent is None
    origin = sub.events[0]
    assert origin.type == "session/origin"
    assert origin.data["parent"] == main.id
    assert origin.data["parent_seq"] == next(e.seq for e in main.events if e.type == "turn/end")
    assert origin.data["why"] == "another agent (system prompt and tools differ)"
    assert "branched from " + main.id in lines[1]
    # each agent's own header, and no break in either
    assert main.header is not None
    assert sub.header is not None
    assert (main.header.system or "").startswith("You are Qwen Code")
    assert "memory" in (sub.header.system or "")
    for session in (main, sub):
        assert [e.type for e in session.events if e.type.startswith("request/")] == [
            "request/header"
        ]
        report = cache_report(session)
        assert [c.kind for r in report.requests for c in r.causes] == []
    cached = CliRunner().invoke(cli, ["cache", main.id, "--json", "--store", str(store)])
    assert cached.exit_code == 0, cached.output
    assert decode(cached.output)["totals"]["requests"] == 1
