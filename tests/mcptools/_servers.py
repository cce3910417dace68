"""MCP servers for the tests, none of them a stand-in for tapelog.

* the reference servers from the package index (``mcp-server-time``,
  ``mcp-server-git``), run over stdio as a user would run them;
* :class:`DynamicServer`, a streamable-HTTP server built with the SDK's
  ``MCPServer`` and served by uvicorn on a free loopback port in a thread,
  whose tool list changes when the model calls ``enable_extra``;
* ``_env_server.py``, a stdio server that echoes a secret from its
  environment (and can crash mid-call).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn
from mcp.server.mcpserver import Context, Image, MCPServer

BIN = Path(sys.executable).parent
TIME = str(BIN / "mcp-server-time")
GIT = str(BIN / "mcp-server-git")
ENV_SERVER = str(Path(__file__).with_name("_env_server.py"))
PNG = b"\x89PNG\r\n\x1a\n" + bytes(40)


class DynamicServer:
    """``echo``, ``picture``, ``stall`` and ``enable_extra`` (which adds ``extra``).

    ``enable_extra`` announces the change (a ``subscriptions/listen`` event on
    the 2026 protocol, ``notifications/tools/list_changed`` before it) and
    returns only once the client has fetched the new list, so the change is
    known before the tool's result is: the test of "the next request carries
    it" does not depend on timing.
    """

    def __init__(self) -> None:
        self.server = MCPServer("dyn", log_level="ERROR", middleware=[self._middleware])
        self._relisted: asyncio.Event | None = None
        self.url = ""
        server = self.server

        @server.tool()
        def echo(text: str) -> str:
            """Echo the text back."""
            return text

        @server.tool(structured_output=False)
        def picture() -> list[Any]:
            """A caption and a small picture."""
            return ["a tiny square", Image(data=PNG, format="png")]

        @server.tool()
        async def stall() -> str:
            """Never answers in time."""
            await asyncio.sleep(30)
            return "late"

        @server.tool()
        async def enable_extra(ctx: Context) -> str:
            """Offer one more tool."""
            if "extra" in {t.name for t in await server.list_tools()}:
                return "already there"

            def extra(n: int) -> int:
                """Double a number."""
                return 2 * n

            self._relisted = asyncio.Event()
            server.add_tool(extra)
            await ctx.notify_tools_changed()
            with contextlib.suppress(Exception):  # the 2026 protocol has no such channel
                await ctx.session.send_tool_list_changed()
            await asyncio.wait_for(self._relisted.wait(), 20)
            return "added the tool extra"

    async def _middleware(self, ctx: Any, call_next: Any) -> Any:
        result = await call_next(ctx)
        if ctx.method == "tools/list" and self._relisted is not None:
            self._relisted.set()
        return result

    @contextmanager
    def running(self) -> Iterator[DynamicServer]:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        app = self.server.streamable_http_app()
        config = uvicorn.Config(app, log_level="error", ws="none")
        uv = uvicorn.Server(config)
        thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        deadline = time.monotonic() + 20
        while not uv.started:
            assert time.monotonic() < deadline, "the MCP HTTP server did not start"
            time.sleep(0.02)
        self.url = f"http://127.0.0.1:{port}/mcp"
        try:
            yield self
        finally:
            uv.should_exit = True
            thread.join(timeout=20)
            sock.close()


def child_pids(word: str) -> list[int]:
    """Processes this process started whose command line contains ``word`` (Linux /proc)."""
    found: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            command = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == os.getpid() and word.encode() in command:
            found.append(int(entry))
    return found


async def wait_until(condition: Any, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.02)
