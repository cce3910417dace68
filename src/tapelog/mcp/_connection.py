"""One connection to one MCP server, through the official ``mcp`` SDK.

This is the only module that imports the SDK, and :mod:`tapelog.mcp` imports
it only when the first server starts: importing tapelog never needs it.

A connection lives in one task (the *runner*) that enters the SDK client,
lists the server's tools, and stays until it is stopped or the server goes
away; the SDK's structured concurrency wants the client entered and left in
one task. Calls run in the caller's task and are bounded by the server's
timeout. The server goes away when its transport ends (the stdio process
exited: its output reached end of file), when a request finds the connection
closed, or when the transport fails; its tools are then dropped at once, so
the next step's header leaves them out. Nothing reconnects on its own
(docs/tools.md says why): :meth:`tapelog.mcp.McpServers.add` starts it again.

A stdio server's stderr goes to a pipe of which only the last few KiB are
kept, to explain a server that does not start; it never reaches the log or
the terminal otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from functools import partial
from typing import Any

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import (
    CONNECTION_CLOSED,
    REQUEST_TIMEOUT,
    Implementation,
    ToolListChangedNotification,
)
from mcp.types import Tool as WireTool
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from tapelog._errors import JsonValueError, McpError, ToolError
from tapelog._version import __version__
from tapelog.agent import SchemaTool, ToolOutcome
from tapelog.log import redact
from tapelog.mcp._config import ServerSpec
from tapelog.mcp._mapping import (
    canonical_schema,
    namespaced,
    render_result,
    schema_bytes,
    truncate,
)
from tapelog.mcp._transport import StderrTail, watched

__all__ = ["Connection", "Limits", "McpTool"]

_CLIENT_INFO = Implementation(name="tapelog", version=__version__)
_MAX_PAGES = 100
_CLOSE_WAIT = 15.0
"""Seconds to wait for a runner to leave the client (the SDK bounds a stdio shutdown itself)."""
_MESSAGE_LIMIT = 2000


class Limits:
    """Bounds on what one server can put in front of the model."""

    def __init__(
        self,
        *,
        max_result_chars: int,
        max_description_chars: int,
        max_schema_bytes: int,
        max_tools: int,
    ) -> None:
        self.max_result_chars = max_result_chars
        self.max_description_chars = max_description_chars
        self.max_schema_bytes = max_schema_bytes
        self.max_tools = max_tools


class McpTool(SchemaTool):
    """A tool of an MCP server, offered as ``<server>__<tool>``."""

    def __init__(
        self,
        name: str,
        description: str,
        parameters: Any,
        handler: Callable[[dict[str, Any]], Awaitable[ToolOutcome]],
        *,
        server: str,
        mcp_name: str,
    ) -> None:
        super().__init__(name, description, parameters, handler)
        self.server = server
        self.mcp_name = mcp_name


class Connection:
    """One MCP server: its state (``new``, ``starting``, ``ready``, ``closed``) and tools."""

    def __init__(self, spec: ServerSpec, *, timeout: float, limits: Limits) -> None:
        self.spec = spec
        self.name = spec.name
        self.timeout = float(spec.timeout if spec.timeout is not None else timeout)
        self.limits = limits
        self.state = "new"
        self.reason: str | None = None
        self.tools: dict[str, McpTool] = {}
        self.skipped: dict[str, str] = {}
        self._done = asyncio.Event()
        self._ready = asyncio.Event()
        self._error: str | None = None
        self._runner: asyncio.Task[None] | None = None
        self._client: Client | None = None
        self._relisting: asyncio.Task[None] | None = None
        self._stale = False
        self._stderr: StderrTail | None = None

    # --- life cycle ------------------------------------------------------------

    async def start(self) -> None:
        """Connect and list the tools; an :class:`McpError` if that fails or times out."""
        self.state = "starting"
        self._runner = asyncio.create_task(self._run(), name=f"tapelog mcp {self.name}")
        ready = asyncio.create_task(self._ready.wait())
        try:
            await asyncio.wait(
                {ready, self._runner}, timeout=self.timeout, return_when=asyncio.FIRST_COMPLETED
            )
        except BaseException:
            await self.close()
            raise
        finally:
            ready.cancel()
        if self.state == "ready":
            return
        if self._error is not None or self.state == "closed":
            why = self._error or self.reason
        else:
            why = f"it did not answer within {self.timeout:g} s"
        hint = self._stderr.last_line() if self._stderr is not None else ""
        await self.close()
        said = f" (its last stderr line: {hint})" if hint else ""
        raise McpError(redact(f"MCP server {self.spec.describe()} did not start: {why}{said}"))

    async def close(self) -> None:
        """Stop the server (a stdio process gets its stdin closed, then a signal)."""
        starting = self.state == "starting"
        self._gone("it was stopped")
        if self._relisting is not None:
            self._relisting.cancel()
        runner = self._runner
        if runner is None or runner.done():
            return
        if not starting:  # leave the client in its own time: the SDK bounds a shutdown
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(runner), _CLOSE_WAIT)
        if not runner.done():  # still connecting (or stuck): cancel it
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)

    async def _run(self) -> None:
        try:
            async with AsyncExitStack() as stack:
                transport = await self._transport(stack)
                client = Client(
                    transport,
                    mode="auto",
                    read_timeout_seconds=self.timeout,
                    message_handler=self._on_message,
                    client_info=_CLIENT_INFO,
                    cache=None,
                )
                try:
                    await stack.enter_async_context(client)
                finally:
                    if self._stderr is not None:
                        self._stderr.spawned()
                self._client = client
                await self._list()
                if self.state != "starting":  # it went away, or was stopped, meanwhile
                    return
                self.state = "ready"
                self._ready.set()
                if self._stale:
                    self._schedule_relist()
                listener = self._listen(client)
                try:
                    await self._done.wait()
                finally:
                    if listener is not None:
                        listener.cancel()
                        await asyncio.gather(listener, return_exceptions=True)
        except Exception as exc:
            self._error = _describe(exc)
            self._gone(f"its connection failed: {self._error}")
        finally:
            self._client = None
            self._gone("its connection ended")

    async def _transport(self, stack: AsyncExitStack) -> AbstractAsyncContextManager[Any]:
        spec = self.spec
        if spec.command is not None:
            self._stderr = StderrTail()
            stack.callback(self._stderr.close)
            errlog = await self._stderr.open()
            params = StdioServerParameters(
                command=spec.command, args=list(spec.args), env=dict(spec.env) or None, cwd=spec.cwd
            )
            return watched(stdio_client(params, errlog=errlog), self._on_end)
        assert spec.url is not None
        http = httpx2.AsyncClient(
            headers=dict(spec.headers), timeout=httpx2.Timeout(30.0, read=300.0)
        )
        await stack.enter_async_context(http)
        return watched(streamable_http_client(spec.url, http_client=http), self._on_end)

    def _listen(self, client: Client) -> asyncio.Task[None] | None:
        """On the 2026 protocol a change notice needs a ``subscriptions/listen`` stream;
        its events reach :meth:`_on_message` like the older protocol's notifications."""
        tools = client.server_capabilities.tools
        if client.protocol_version not in MODERN_PROTOCOL_VERSIONS or not (
            tools and tools.list_changed
        ):
            return None

        async def listen() -> None:
            with contextlib.suppress(Exception):
                async with client.listen(tools_list_changed=True) as events:
                    async for _ in events:
                        pass

        return asyncio.create_task(listen(), name=f"tapelog mcp {self.name} listen")

    def _on_end(self) -> None:
        self._gone("its process exited or its connection dropped")

    def _gone(self, reason: str) -> None:
        if self.state == "closed":
            return
        self.state = "closed"
        self.reason = reason
        self.tools = {}
        self._done.set()

    # --- tools -----------------------------------------------------------------

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, ToolListChangedNotification):
            self._schedule_relist()

    def _schedule_relist(self) -> None:
        self._stale = True
        if self.state == "ready" and (self._relisting is None or self._relisting.done()):
            self._relisting = asyncio.get_running_loop().create_task(self._relist())

    async def _relist(self) -> None:
        while self._stale and self.state == "ready":
            self._stale = False
            try:
                await self._list()
            except MCPError as exc:
                if exc.code == CONNECTION_CLOSED:
                    self._on_end()
                return  # a slow or failing listing keeps the tools it had
            except Exception:
                return

    async def settle(self) -> None:
        """Wait (at most the timeout) for a re-listing under way."""
        task = self._relisting
        if task is not None and not task.done():
            await asyncio.wait({task}, timeout=self.timeout)

    async def _list(self) -> None:
        client = self._client
        if client is None:
            return
        listed: list[WireTool] = []
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            page = await client.list_tools(cursor=cursor)
            listed.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        if self.state != "closed":
            self._set_tools(listed)

    def _set_tools(self, listed: list[WireTool]) -> None:
        limits = self.limits
        tools: dict[str, McpTool] = {}
        skipped: dict[str, str] = {}
        for wire in sorted(listed, key=lambda t: t.name):
            if len(tools) >= limits.max_tools:
                skipped[wire.name] = f"the server offers more than {limits.max_tools} tools"
                continue
            name = namespaced(self.name, wire.name)
            if name in tools:
                skipped[wire.name] = f"its name {name!r} is taken by {tools[name].mcp_name!r}"
                continue
            description = truncate(
                wire.description or wire.title or "", limits.max_description_chars, "description"
            )
            try:
                parameters = canonical_schema(wire.input_schema, path=f"{name}.inputSchema")
                made = self._tool(name, wire.name, description, parameters)
            except (JsonValueError, ToolError) as exc:
                skipped[wire.name] = f"its input schema is not usable ({exc})"
                continue
            size = schema_bytes(made.schema())
            if size > limits.max_schema_bytes:
                skipped[wire.name] = (
                    f"its schema has {size} bytes (limit {limits.max_schema_bytes})"
                )
                continue
            tools[name] = made
        self.tools, self.skipped = tools, skipped

    def _tool(self, name: str, mcp_name: str, description: str, parameters: Any) -> McpTool:
        """The tool; the one already offered when nothing changed (same frozen schema)."""
        old = self.tools.get(name)
        if (
            old is not None
            and old.mcp_name == mcp_name
            and old.description == description
            and old.parameters == parameters
        ):
            return old
        handler = partial(self._call, mcp_name)
        return McpTool(name, description, parameters, handler, server=self.name, mcp_name=mcp_name)

    def missing(self, name: str) -> ToolOutcome | None:
        """The error for a call of one of this server's tools that is no longer offered."""
        if self.state == "ready":
            return None  # the server is there and does not offer it: an unknown tool
        return self._not_running(name.partition("__")[2])

    def _not_running(self, mcp_name: str) -> ToolOutcome:
        why = self.reason or "it is not running"
        return self._error_outcome(
            mcp_name,
            "not_running",
            f"the MCP server {self.name!r} is not available: {why}; "
            "its tools are no longer offered",
        )

    async def _call(self, mcp_name: str, arguments: dict[str, Any]) -> ToolOutcome:
        client = self._client
        if self.state != "ready" or client is None:
            return self._not_running(mcp_name)
        try:
            result = await asyncio.wait_for(
                client.call_tool(mcp_name, arguments, read_timeout_seconds=self.timeout),
                self.timeout + 1.0,
            )
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                self._on_end()
                return self._error_outcome(
                    mcp_name,
                    "closed",
                    f"the MCP server {self.name!r} went away during {mcp_name} (its process "
                    "exited or the connection dropped); its tools are no longer offered",
                )
            if exc.code == REQUEST_TIMEOUT:
                return self._timeout(mcp_name)
            return self._error_outcome(
                mcp_name,
                "protocol",
                f"the MCP server {self.name!r} refused {mcp_name}: {exc.message}",
                code=exc.code,
            )
        except TimeoutError:
            return self._timeout(mcp_name)
        except Exception as exc:
            if self.state == "closed":
                return self._error_outcome(mcp_name, "closed", f"{self.reason} during {mcp_name}")
            return self._error_outcome(
                mcp_name, "failed", f"calling {mcp_name} on {self.name!r} failed: {_describe(exc)}"
            )
        data = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        text = render_result(data, limit=self.limits.max_result_chars)
        if result.is_error:
            return ToolOutcome(
                content=text,
                is_error=True,
                error={"kind": "mcp", "server": self.name, "tool": mcp_name, "type": "tool_error"},
            )
        return ToolOutcome(content=text)

    def _timeout(self, mcp_name: str) -> ToolOutcome:
        return self._error_outcome(
            mcp_name,
            "timeout",
            f"the MCP server {self.name!r} did not answer {mcp_name} within "
            f"{self.timeout:g} s; the call was abandoned",
        )

    def _error_outcome(
        self, mcp_name: str, kind: str, message: str, *, code: int | None = None
    ) -> ToolOutcome:
        message = truncate(message, _MESSAGE_LIMIT, "message")
        error: dict[str, Any] = {
            "kind": "mcp",
            "server": self.name,
            "tool": mcp_name,
            "type": kind,
            "message": message,
        }
        if code is not None:
            error["code"] = code
        return ToolOutcome(content=message, is_error=True, error=error)


def _describe(exc: BaseException) -> str:
    """One line for an exception, looking inside the groups structured concurrency raises."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, FileNotFoundError):
        return f"command not found: {exc.filename or exc}"
    if isinstance(exc, MCPError):
        if exc.code == CONNECTION_CLOSED:
            return "it exited or closed the connection"
        return exc.message
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
