"""What the serve tests share: the app on a real loopback port, the stores they
read (the demo's sessions, and logs written event by event), and the CLI's
numbers to compare the pages with."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn
from click.testing import CliRunner

from tapelog.cli import cli
from tapelog.log import decode
from tapelog.log._api import EpochHeader, Event, LlmCallConfig, Session

TIME = 1_764_480_000_000


@contextmanager
def served(app: Any) -> Iterator[str]:
    """Serve ``app`` with uvicorn on a free 127.0.0.1 port (lifespan on); its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app, log_level="warning", lifespan="on", ws="none", timeout_graceful_shutdown=1
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start within 10 s"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def tapelog(*args: str) -> str:
    """Run a tapelog command in process; its stdout (the test fails on a non-zero exit).

    It runs on a thread of its own: Playwright's sync API keeps an event loop
    running on the test's thread, where ``asyncio.run`` (``tapelog demo``) refuses.
    """
    with ThreadPoolExecutor(1) as pool:
        result = pool.submit(CliRunner().invoke, cli, list(args), obj={"debug": True}).result()
    assert result.exit_code == 0, result.output
    return result.stdout


def tapelog_json(*args: str) -> Any:
    return decode(tapelog(*args, "--json").encode())


def demo_sessions(store: str, runs: int = 2) -> list[str]:
    """Run ``tapelog demo`` ``runs`` times into ``store``; the session ids, oldest first."""
    for _ in range(runs):
        tapelog("demo", "--store", store)
    rows = tapelog_json("sessions", "--store", store)
    return [r["id"] for r in sorted(rows, key=lambda r: (r["created"], r["id"]))]


class HandLog:
    """A loop log written event by event (valid by construction, any text in it).

    Each turn: a user message, a step calling ``tool`` (with its result), then a
    step answering ``answer``; every answer logs usage, the cache growing by the
    previous prompt.
    """

    def __init__(
        self,
        session_id: str,
        *,
        tool: str = "read",
        provider: str = "deepseek",
        model: str = "deepseek-chat",
        created: int = TIME,
    ) -> None:
        self.session = Session(session_id, created=created, clock=lambda: created)
        self.tool, self.provider, self.model = tool, provider, model
        self.turn = 0
        self.prompt = 0
        self.evicted = False

    def header(self) -> None:
        header = EpochHeader(
            config=LlmCallConfig(provider=self.provider, model=self.model),
            system="You are terse.",
            tools=({"name": self.tool, "description": f"The {self.tool} tool."},),
        )
        self.session.append("request/header", {"header": header.to_json(), "reason": "initial"})

    def _answer(self, step: int, content: list[dict[str, Any]]) -> Event:
        usage = {"input": 100, "cache_read": self.prompt, "cache_write": 0, "output": 5}
        if self.evicted:  # the provider read nothing from its cache
            usage |= {"input": 100 + self.prompt, "cache_read": 0}
        self.prompt += 100
        data = {
            "turn": self.turn,
            "step": step,
            "content": content,
            "source": {"provider": self.provider, "model": self.model},
            "usage": usage | {"reasoning": 0},
        }
        return self.session.append("assistant/message", data, surface_op="append")

    def ask(self, text: str, answer: str, *, tool_output: str = "ok") -> list[Event]:
        """One whole turn; the events it logged."""
        s = self.session
        first = len(s)
        self.turn += 1
        turn = self.turn
        s.append("turn/start", {"turn": turn})
        user = {"content": [{"type": "text", "text": text}], "source": {"kind": "user"}}
        s.append("user/message", user, surface_op="append")
        s.append("step/start", {"turn": turn, "step": 1})
        if s.header is None:
            self.header()
        call = {"type": "tool_call", "id": f"c{turn}", "name": self.tool, "arguments": "{}"}
        self._answer(1, [call])
        base = {"turn": turn, "step": 1, "call_id": f"c{turn}"}
        s.append("tool/call", base | {"name": self.tool, "arguments": "{}"})
        result = base | {"content": tool_output, "is_error": False}
        s.append("tool/result", result, surface_op="append")
        s.append("step/end", {"turn": turn, "step": 1})
        s.append("step/start", {"turn": turn, "step": 2})
        self._answer(2, [{"type": "text", "text": answer}])
        s.append("step/end", {"turn": turn, "step": 2})
        s.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
        return list(s.events[first:])


def write_store(root: Path, *logs: HandLog) -> None:
    """Store each hand-written log as a session of the JSONL store at ``root``,
    ending with a ``log/digest`` as every write of the loop's does."""
    from tapelog.store import JsonlStore

    store = JsonlStore(root)
    for log in logs:
        with store.create(log.session) as writer:
            writer.checkpoint()
