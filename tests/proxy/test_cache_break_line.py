"""The live cache-break line, through the real CLI: ``tapelog proxy`` in front
of ``tapelog emulator``, both subprocesses, a scripted client that reorders a
tool schema's keys; the proxy's line names it as ``tapelog cache`` does."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from tapelog.audit import cache_report

from ._helpers import SECRET, sessions_in

CODE = "from tapelog.cli import main; main()"
ENV = {**os.environ, "DEEPSEEK_API_KEY": "", "TAPELOG_PROVIDERS": ""}


@contextmanager
def _tapelog(
    *args: str, lines: int, rest: list[str] | None = None
) -> Iterator[tuple[subprocess.Popen[str], list[str]]]:
    """``tapelog ARGS`` in a subprocess, its first ``lines`` lines of output
    read; what it prints after them goes to ``rest`` when it has stopped."""
    proc = subprocess.Popen(
        [sys.executable, "-c", CODE, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    try:
        assert proc.stdout is not None
        yield proc, [proc.stdout.readline() for _ in range(lines)]
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
        assert proc.returncode == 0, err
        if rest is not None:
            rest.extend(out.splitlines())


def _schema(order: list[str]) -> list[dict[str, Any]]:
    properties = {name: {"type": "string", "description": f"The {name} part."} for name in order}
    function = {
        "name": "lookup",
        "description": "Look a word up.",
        "parameters": {"type": "object", "properties": properties, "required": order},
    }
    return [{"type": "function", "function": function}]


def _requests(url: str) -> None:
    """Two turns of one conversation; the second sends the tool schema's keys
    in another order (a client that rebuilt its schema from a set)."""
    system = {"role": "system", "content": "You answer questions about words. " * 40}
    first = [system, {"role": "user", "content": "What is a tape?"}]
    head = {"authorization": f"Bearer {SECRET}"}
    body: dict[str, Any] = {"model": "deepseek-chat", "messages": first}
    answer = httpx.post(url, json={**body, "tools": _schema(["word", "lang"])}, headers=head)
    assert answer.status_code == 200, answer.text
    reply = answer.json()["choices"][0]["message"]
    reply = {k: v for k, v in reply.items() if v is not None}
    second = [*first, reply, {"role": "user", "content": "And a log?"}]
    again = httpx.post(
        url, json={**body, "messages": second, "tools": _schema(["lang", "word"])}, headers=head
    )
    assert again.status_code == 200, again.text


def _proxy(base: str, store: Path, *extra: str, rest: list[str] | None = None) -> Any:
    args = ["proxy", "--upstream", "deepseek", "--base-url", base, "--port", "0"]
    return _tapelog(*args, "--store", str(store), *extra, lines=6, rest=rest)


def test_the_proxy_prints_a_line_naming_a_reordered_tool_schema(tmp_path: Path) -> None:
    store = tmp_path / "sessions"
    with _tapelog("emulator", "--port", "0", lines=4) as (_, urls):
        base = next(u.split()[1] for u in urls if u.startswith("deepseek"))
        with _proxy(base, store) as (proc, head):
            port = re.search(r"http://127\.0\.0\.1:(\d+)", head[0])
            assert port is not None, head
            _requests(f"http://127.0.0.1:{port.group(1)}/v1/chat/completions")
            assert proc.stdout is not None
            printed = [proc.stdout.readline() for _ in range(3)]
        quiet: list[str] = []
        with _proxy(base, tmp_path / "quiet", "--quiet", rest=quiet) as (_, head):
            port = re.search(r"http://127\.0\.0\.1:(\d+)", head[0])
            assert port is not None, head
            _requests(f"http://127.0.0.1:{port.group(1)}/v1/chat/completions")
    assert len(quiet) == 2, quiet  # one line per request, no cache-break line
    first, second, broke = printed
    assert "new session" in first
    assert "cache break" not in first
    (session,) = sessions_in(store).values()
    before, row = cache_report(session).requests  # what ``tapelog cache`` says
    assert row.drop
    labels = ", ".join(c.label for c in row.causes)
    assert "lookup" in labels
    assert broke.startswith(f"cache break: {session.id} request 2: {labels}; "), broke
    could = re.search(r"; ([\d,]+) prompt tokens could have been read from cache", broke)
    assert could is not None, broke
    # The first request's whole prompt was cacheable for the second; it read none of it.
    assert int(could.group(1).replace(",", "")) == before.prompt_tokens - row.cached_reported
    assert before.prompt_tokens > 300
    assert second.startswith(f"{session.id} turn 2: ")
