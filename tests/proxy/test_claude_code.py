"""Claude Code, offline, through ``tapelog proxy`` in front of ``tapelog emulator``.

The real CLI (tests/realagents, pinned) runs two prompts in a temporary git
repository with a temporary HOME: the emulator is scripted so that the first
runs Claude Code's own Bash and Read tools before answering, the second
continues the conversation (``--continue``). Two recorders show both sides of
the proxy: every upstream body parses equal to the client's (but for
``stream``), is byte for byte what ``tapelog requests`` rebuilds from the log,
and carries the client's query string and ``anthropic-beta`` header; ``tapelog
verify`` passes and ``tapelog cache`` finds no unexplained drop. docs/proxy.md,
"Claude Code", has the same commands.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tapelog.log import decode

from ._claude_code import claude_dirs, run_claude
from ._frameworks import proxy_process
from ._helpers import own_requests, serve, sessions_in
from ._recorder import Recorder

TAPELOG = [sys.executable, "-c", "from tapelog.cli import main; main()"]


def _script(repo: Path) -> list[dict[str, object]]:
    bash = {"command": "echo hi > a.txt", "description": "Write a file"}
    read = {"file_path": str(repo / "a.txt")}
    return [
        {"tool_calls": [{"name": "Bash", "arguments": json.dumps(bash)}]},
        {"tool_calls": [{"name": "Read", "arguments": json.dumps(read)}]},
        {"text": "The file says hi."},
        {"text": "It still says hi."},
    ]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def emulator_process(script: Path) -> Iterator[int]:
    """``tapelog emulator --script`` in a subprocess; its port once it answers."""
    port = _free_port()
    command = [*TAPELOG, "emulator", "--port", str(port), "--script", str(script)]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200:
                    break
            except httpx.HTTPError:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                assert time.monotonic() < deadline, "the emulator did not start"
                time.sleep(0.1)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        if proc.stderr is not None:
            proc.stderr.close()


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*TAPELOG, *args], capture_output=True, text=True, timeout=60)


def test_claude_code_runs_two_turns_with_its_tools_through_the_proxy(tmp_path: Path) -> None:
    repo, home = claude_dirs(tmp_path)
    store = tmp_path / "store"
    script = tmp_path / "script.json"
    script.write_text(json.dumps(_script(repo)))
    output: list[str] = []
    with emulator_process(script) as emulator:
        upstream = Recorder(f"http://127.0.0.1:{emulator}")
        with (
            serve(upstream) as upstream_port,
            proxy_process(store, "anthropic", upstream_port, output) as proxy,
        ):
            client = Recorder(f"http://127.0.0.1:{proxy}")
            with serve(client) as front:
                first = run_claude(
                    repo, home, front, "Write hi to a.txt, then read it back.", allowed="Bash Read"
                )
                second = run_claude(
                    repo, home, front, "--continue", "What does it say now?", allowed="Bash Read"
                )
    assert first == "The file says hi."
    assert second == "It still says hi."
    assert (repo / "a.txt").read_text() == "hi\n"  # Claude Code ran its own Bash tool

    # Both sides of the proxy: the upstream read what the client sent.
    assert len(client.seen) == len(upstream.seen) >= 4, output
    for sent, forwarded in zip(client.seen, upstream.seen, strict=True):
        assert forwarded.query == sent.query == "beta=true"
        assert forwarded.headers["anthropic-beta"] == sent.headers["anthropic-beta"]
        mine, theirs = decode(sent.body), decode(forwarded.body)
        assert mine.pop("stream") is theirs.pop("stream") is True
        assert mine == theirs

    # The log rebuilds every upstream body byte for byte, and audits clean.
    sessions = sessions_in(store)
    assert len(sessions) == 1, output
    ((sid, session),) = sessions.items()
    assert own_requests(session) == [r.body for r in upstream.seen]
    header = session.header
    assert header is not None
    assert header.config.headers["anthropic-beta"] == client.seen[0].headers["anthropic-beta"]
    assert header.config.wire["query"] == "beta=true"
    assert isinstance(header.system, tuple | list)  # Claude Code's system blocks, kept
    verified = _cli("verify", sid, "--store", str(store))
    assert verified.returncode == 0, verified.stdout + verified.stderr
    audit = _cli("cache", sid, "--store", str(store), "--json")
    assert audit.returncode == 0, audit.stderr
    report = json.loads(audit.stdout)
    causes = [c for r in report["requests"] for c in r["causes"]]
    assert "unexplained" not in {c["kind"] for c in causes}
    assert all(not r["drop"] for r in report["requests"])
    # Claude Code moves its last cache marker every request: the audit names it.
    assert any(
        "cache_control" in str(c["detail"].get("field", "")) + str(c["detail"].get("old"))
        for c in causes
    )
