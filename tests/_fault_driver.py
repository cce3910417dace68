"""The fault campaign's driver: ``tapelog run`` in forked children, SIGKILLed at random.

Run by tests/test_fault_campaign.py as a subprocess (single-threaded, so fork
is safe): it imports tapelog once, then for each trial forks a child that runs
the real command line (``tapelog.cli.main(["run", ...])``) against the loopback
emulator the test serves, and kills it with SIGKILL after a random short
delay. Sessions are taken in turn, one writer at a time each, so each one goes
through many kills and resumes.

Every flush that returned in a child is reported to ``REPORT`` as one line
``<session> <events> <sha256 of their lines>`` (written after the flush
returned, so a report never claims more than was flushed). ``RESULT`` gets one
JSON object: the trials and how each ended.

    python tests/_fault_driver.py PORT STORE WORKSPACE REPORT RESULT SEED KILLS SESSIONS
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import random
import signal
import sys
import time
from typing import Any


def _child(args: list[str], report_fd: int, log_path: str) -> None:
    """In the forked child: run the command line, report flushes, never return."""
    code = 70
    try:
        out = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(out, 1)
        os.dup2(out, 2)
        from tapelog.cli import main
        from tapelog.store import SessionWriter

        flush = SessionWriter.flush

        def reporting_flush(self: SessionWriter) -> None:
            flush(self)
            stored = self._stored_events
            lines = b"".join(e.encode() + b"\n" for e in self.session.events[:stored])
            digest = hashlib.sha256(lines).hexdigest()
            os.write(report_fd, f"{self.session_id} {stored} {digest}\n".encode())

        SessionWriter.flush = reporting_flush  # type: ignore[method-assign]
        try:
            main(args)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # anything else: say so in the child's log
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def main() -> None:
    port, store, workspace, report, result = sys.argv[1:6]
    seed, kills, sessions = (int(x) for x in sys.argv[6:9])
    os.environ["TAPELOG_STORE"] = store
    os.environ["TAPELOG_CHECK"] = "1"
    os.environ.pop("TAPELOG_PROVIDER", None)
    # Import everything a run needs before forking, so a child starts at once.
    for module in ("tapelog.cli", "tapelog.emulator", "tapelog.store", "httpx"):
        importlib.import_module(module)
    # ...and warm what a run loads lazily on its first use (pydantic's schema
    # machinery for the fs tools, the TLS context of an HTTP client, anyio's
    # asyncio backend), none of which starts a thread.
    from tapelog.agent import fs_tools

    fs_tools(workspace)
    importlib.import_module("anyio._backends._asyncio")
    import httpx

    httpx.AsyncClient()
    rng = random.Random(seed)
    report_fd = os.open(report, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    ids = [f"fault-{i:02d}" for i in range(sessions)]
    trials: list[dict[str, Any]] = []
    killed = 0
    started = time.monotonic()
    number = 0
    # Calibrate the kill window on this machine, now: how long a whole run takes
    # (start, turn, end) depends on the machine and its load, and kills must land
    # inside turns, not only before them.
    spans = []
    for session_id in ids[:2]:
        number += 1
        trials.append(_trial(session_id, number, rng, port, workspace, report_fd, True))
        spans.append(trials[-1]["seconds"])
    span = max(0.2, min(spans))
    while killed < kills:
        session_id = ids[number % sessions]
        number += 1
        trials.append(_trial(session_id, number, rng, port, workspace, report_fd, False, span))
        killed += trials[-1]["killed"]
        if time.monotonic() - started > 240:
            break
    for session_id in ids:  # a run to completion on every session: resume and repair
        number += 1
        trials.append(_trial(session_id, number, rng, port, workspace, report_fd, True))
    with open(result, "w", encoding="utf-8") as f:
        json.dump({"trials": trials, "seconds": time.monotonic() - started}, f)


def _trial(
    session_id: str,
    number: int,
    rng: random.Random,
    port: str,
    workspace: str,
    report_fd: int,
    final: bool,
    span: float = 0.3,
) -> dict[str, Any]:
    args = [
        "run",
        f"Look around, trial {number}.",
        "--session",
        session_id,
        "--provider",
        "emulator",
        "--base-url",
        f"http://127.0.0.1:{port}/v1",
        "--system",
        f"fault session {session_id}.",
        "--tools",
        "fs",
        "--workspace",
        workspace,
    ]
    log_path = os.path.join(os.path.dirname(workspace), f"trial-{number:04d}.log")
    began = time.monotonic()
    pid = os.fork()
    if pid == 0:
        _child(args, report_fd, log_path)
    # A forked child reaches its turn after about 40% of a whole run (``span``,
    # measured at the start): a quarter of the kills land while it starts
    # (create, open, repair), the rest inside the turn (requests, flushes,
    # tools, its end).
    if final:
        delay = None
    elif rng.random() < 0.25:
        delay = rng.uniform(0.0, 0.4 * span)
    else:
        delay = rng.uniform(0.4 * span, 1.05 * span)
    deadline = time.monotonic() + (60 if delay is None else delay)
    status = None
    while status is None and time.monotonic() < deadline:
        done, status_code = os.waitpid(pid, os.WNOHANG)
        if done:
            status = status_code
            break
        time.sleep(0.002)
    if status is None:
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    signaled = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    return {
        "session": session_id,
        "number": number,
        "final": final,
        "killed": int(signaled),
        "exit": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
        "log": log_path,
        "seconds": round(time.monotonic() - began, 3),
    }


if __name__ == "__main__":
    main()
