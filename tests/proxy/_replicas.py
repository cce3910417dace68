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
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from tapelog.log._api import Session
from tapelog.store import SessionStore
from tapelog.store._api import verify_jsonl

__all__ = ["Replica", "replicas", "stored_sessions"]

_CODE = "from tapelog.cli import main; main()"


@dataclass
class Replica:
    """One ``tapelog proxy`` process; :meth:`start` (again) after :meth:`kill`."""

    store: str
    upstream_port: int
    port: int = 0
    proc: subprocess.Popen[str] | None = None
    outputs: list[str] = field(default_factory=list)

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
        env = {**os.environ, "DEEPSEEK_API_KEY": "", "TAPELOG_PROVIDERS": ""}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _CODE, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
        assert self.proc.stdout is not None
        first = self.proc.stdout.readline()
        found = re.search(r"http://127\.0\.0\.1:(\d+)", first)
        assert found is not None, first + self.proc.stdout.read()
        self.port = int(found.group(1))
        self.outputs.append(first)

    def kill(self) -> None:
        """SIGKILL: no flush, no clean close; what was durable stays."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=20)
        self._collect()

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            self._collect()
            return
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=20)
        self._collect()

    def _collect(self) -> None:
        if self.proc is not None and self.proc.stdout is not None:
            self.outputs.append(self.proc.stdout.read())
            self.proc.stdout.close()


@contextmanager
def replicas(store: str, upstream_port: int, count: int) -> Iterator[list[Replica]]:
    """``count`` started replicas on ``store``; stopped (SIGINT) at the end."""
    started: list[Replica] = []
    try:
        for _ in range(count):
            replica = Replica(store, upstream_port)
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
