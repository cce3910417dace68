"""Proxy replicas as a user runs them: ``tapelog proxy`` subprocesses on one store.

Each replica is a real ``tapelog proxy`` process (the CLI, uvicorn, its own
event loop and store connections); the upstream is an emulator served in the
test's process, so :attr:`Emulator.received` holds every body it was sent.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tapelog.log._api import Session
from tapelog.store import SessionStore
from tapelog.store._api import verify_jsonl

__all__ = ["Replica", "replicas", "stored_sessions"]

_CODE = "from tapelog.cli import main; main()"


@dataclass
class Replica:
    """One ``tapelog proxy`` process, its output in ``log``; :meth:`start` (again,
    on the same port) after :meth:`kill`."""

    store: str
    upstream_port: int
    log: Path
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> None:
        args = [
            "proxy",
            "--upstream",
            "deepseek",
            "--base-url",
            f"http://127.0.0.1:{self.upstream_port}/deepseek",
            "--port",
            str(self.port),
            "--store",
            self.store,
        ]
        env = {
            **os.environ,
            "DEEPSEEK_API_KEY": "",
            "TAPELOG_PROVIDERS": "",
            "PYTHONUNBUFFERED": "1",
        }
        start = self.log.stat().st_size if self.log.exists() else 0
        with self.log.open("ab") as out:  # a file, not a pipe: nothing blocks on a full pipe
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _CODE, *args], stdout=out, stderr=subprocess.STDOUT, env=env
            )
        deadline = time.monotonic() + 30
        while True:
            text = self.log.read_bytes()[start:].decode(errors="replace")
            found = re.search(r"tapelog proxy on http://127\.0\.0\.1:(\d+)", text)
            if found is not None:
                self.port = int(found.group(1))
                return
            assert self.proc.poll() is None, text
            assert time.monotonic() < deadline, f"the proxy did not start: {text}"
            time.sleep(0.02)

    def kill(self) -> None:
        """SIGKILL: no flush, no clean close; what was durable stays."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=20)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=20)


@contextmanager
def replicas(store: str, upstream_port: int, count: int, logs: Path) -> Iterator[list[Replica]]:
    """``count`` started replicas on ``store`` (their output in ``logs``); stopped
    (SIGINT) at the end."""
    started: list[Replica] = []
    try:
        for i in range(count):
            replica = Replica(store, upstream_port, logs / f"replica-{i}.log")
            replica.start()
            started.append(replica)
        yield started
    finally:
        for replica in started:
            replica.stop()


def stored_sessions(store: SessionStore) -> dict[str, Session]:
    """Every session of ``store``, each verified from its stored bytes first."""
    out: dict[str, Session] = {}
    for summary in store.list():
        report = verify_jsonl(store.session_bytes(summary.id), expected_id=summary.id)
        assert report.ok, [str(p.error) for p in report.problems]
        out[summary.id] = store.load(summary.id).session
    return out
