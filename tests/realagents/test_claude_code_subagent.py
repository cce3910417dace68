"""Claude Code (2.1.332) starts a subagent through ``tapelog proxy``, offline.

The emulator is scripted so that the main agent's first answer calls Claude
Code's ``Agent`` tool (2.1.332 offers ``Agent``, not ``Task``) with
``run_in_background: false``: the subagent then runs synchronously, so the
three requests arrive in a known order and take the script's entries in turn:
the main agent's first request (the ``Agent`` call), the subagent's own
request (its own system prompt and tools; it answers with text at once), then
the main agent's second request (carrying the subagent's report), answered
with text. The proxy keeps the subagent in its own session linked to the main
one by Claude Code's ``x-claude-code-session-id``, and the main session's
cache audit names no ``system``/``tools`` change.
"""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from proxy._claude_code import claude_dirs, run_claude
from proxy._helpers import assert_rebuilds, serve, sessions_in, upstream_for
from tapelog.cli import cli
from tapelog.emulator import Emulator
from tapelog.log import decode
from tapelog.log._api import encode_str
from tapelog.proxy import Proxy
from tapelog.store import JsonlStore

TASK = {
    "description": "Say hi",
    "prompt": "Reply with the word hi.",
    "subagent_type": "general-purpose",
    "run_in_background": False,
}
SCRIPT = [
    {"tool_calls": [{"name": "Agent", "arguments": encode_str(TASK)}]},  # main agent
    {"text": "hi"},  # the subagent
    {"text": "The subagent said hi."},  # main agent, with the subagent's report
]
HEADER_CAUSES = {"header-delta", "header-fallback", "resume-drift", "unexplained"}


def _tools(body: dict[str, object]) -> list[str]:
    tools = body.get("tools")
    assert isinstance(tools, list)
    return [tool["name"] for tool in tools]


def test_claude_code_subagent_is_its_own_session_linked_to_the_main_one(
    tmp_path: Path,
) -> None:
    repo, home = claude_dirs(tmp_path)
    store = tmp_path / "store"
    emu = Emulator(script=SCRIPT)
    lines: list[str] = []
    with serve(emu.app) as emu_port:
        proxy = Proxy(
            upstream_for("anthropic", emu_port),
            JsonlStore(store),
            on_request=lambda summary: lines.append(summary.line()),
        )
        with serve(proxy.app) as port:
            said = run_claude(repo, home, port, "Use a subagent to say hi.", allowed="Agent")
    assert said == "The subagent said hi."
    assert [r.status for r in emu.received] == [200, 200, 200], lines
    main_first, sub_first, main_second = (r.json() for r in emu.received)
    assert "Agent" in _tools(main_first)
    assert _tools(sub_first) != _tools(main_first)  # the subagent's own tools
    assert sub_first["system"] != main_first["system"]  # and its own system prompt
    assert "Reply with the word hi." in encode_str(sub_first["messages"])
    handed_back = encode_str(main_second["messages"][-1])  # the subagent's report
    assert "tool_result" in handed_back
    assert "hi" in handed_back

    sessions = sessions_in(store)  # each passes verify first
    assert_rebuilds(sessions, emu)  # every upstream body, byte for byte
    assert len(sessions) == 2, lines
    (sub,) = [s for s in sessions.values() if s.info.parent is not None]
    main = sessions[sub.info.parent or ""]
    assert main.info.parent is None
    origin = sub.events[0]
    assert origin.type == "session/origin"
    assert origin.data["parent"] == main.id
    assert origin.data["client"]["signal"] == "x-claude-code-session-id"
    assert origin.data["client"] == main.events[0].data["client"]  # one client run
    assert "branched from " + main.id in lines[1]

    # The main agent's header never changed: one snapshot, no header cause.
    assert [e.type for e in main.events if e.type.startswith("request/")] == ["request/header"]
    runner = CliRunner()
    for session in (main, sub):
        verified = runner.invoke(cli, ["verify", session.id, "--store", str(store)])
        assert verified.exit_code == 0, verified.output
    cached = runner.invoke(cli, ["cache", main.id, "--json", "--store", str(store)])
    assert cached.exit_code == 0, cached.output
    report = decode(cached.output)
    assert report["totals"]["requests"] == 2
    causes = [c for r in report["requests"] for c in r["causes"]]
    assert not HEADER_CAUSES & {c["kind"] for c in causes}, causes
    for cause in causes:
        fields = cause["detail"].get("fields") or []
        assert "system" not in fields, cause
        assert "tools" not in fields, cause
