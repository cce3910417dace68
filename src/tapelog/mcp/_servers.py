"""A set of MCP servers whose tools an :class:`~tapelog.agent.Agent` offers.

:class:`McpServers` is a :class:`~tapelog.agent.ToolSource`: pass it in an
agent's tools (``Agent(..., tools=[*my_tools, servers])``) and every step
offers the tools the servers have at that moment, sorted by name with the
rest, whatever order the servers started in. A change (a server's
``tools/list_changed`` notice, a server added, removed or gone) reaches the
model only through the next step's header, which the loop logs as a
``request/header-delta``. Before each step the loop awaits :meth:`refresh`,
which waits (at most a server's timeout) for re-listings under way, so a
notice that arrived during a tool call is in the very next request.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from tapelog._errors import McpError
from tapelog.agent import Tool, ToolOutcome
from tapelog.mcp._config import ServerSpec, load_config, parse_config

if TYPE_CHECKING:
    from tapelog.mcp._connection import Connection

__all__ = ["McpServers", "ServerStatus"]

DEFAULT_TIMEOUT = 60.0
"""Seconds a server may take to start, and to answer any one request."""


@dataclass(frozen=True, kw_only=True)
class ServerStatus:
    """What one server is doing: ``state`` is ``new``, ``starting``, ``ready`` or
    ``closed`` (then ``reason`` says why); ``tools`` are the names offered,
    ``skipped`` maps tools not offered to the reason."""

    name: str
    transport: str
    state: str
    tools: tuple[str, ...] = ()
    skipped: Mapping[str, str] = field(default_factory=dict)
    reason: str | None = None


MISSING_SDK = (
    "MCP servers need the mcp extra (the official MCP Python SDK), which is not "
    "installed: pip install 'tapelog[mcp]'"
)


def _require_sdk() -> None:
    """Import the SDK-backed connection module, or say how to install the SDK."""
    try:
        import tapelog.mcp._connection  # noqa: F401
    except ImportError:
        # Whichever of the SDK's own dependencies is missing, the fix is the extra.
        raise McpError(MISSING_SDK) from None


class McpServers:
    """MCP servers (stdio and streamable HTTP) and their tools; an async context manager.

    ``timeout`` (seconds, default 60) bounds starting a server and every
    request to it, unless the server's own config sets ``timeout``.
    ``max_result_chars`` bounds the text of one tool result,
    ``max_description_chars`` a tool description, ``max_schema_bytes`` one
    tool's encoded schema (a larger tool is not offered) and ``max_tools``
    the tools taken from one server.
    """

    def __init__(
        self,
        servers: Iterable[ServerSpec] = (),
        *,
        timeout: float = DEFAULT_TIMEOUT,
        max_result_chars: int = 100_000,
        max_description_chars: int = 4_000,
        max_schema_bytes: int = 32 * 1024,
        max_tools: int = 256,
    ) -> None:
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise McpError("the MCP timeout must be a positive number of seconds")
        for label, value in (
            ("max_result_chars", max_result_chars),
            ("max_description_chars", max_description_chars),
            ("max_schema_bytes", max_schema_bytes),
            ("max_tools", max_tools),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise McpError(f"{label} must be a positive integer, not {value!r}")
        self.timeout = float(timeout)
        self._limits = {
            "max_result_chars": max_result_chars,
            "max_description_chars": max_description_chars,
            "max_schema_bytes": max_schema_bytes,
            "max_tools": max_tools,
        }
        self._specs: dict[str, ServerSpec] = {}
        self._connections: dict[str, Connection] = {}
        for spec in servers:
            if spec.name in self._specs:
                raise McpError(f"two MCP servers are named {spec.name!r}; give each its own name")
            self._specs[spec.name] = spec

    @classmethod
    def from_config(
        cls,
        config: Mapping[str, Any] | str | os.PathLike[str],
        **options: Any,
    ) -> McpServers:
        """Servers from a config object or a JSON file (``{"mcpServers": {...}}``).

        Nothing starts yet: use ``async with`` or :meth:`start`.
        """
        specs = parse_config(config) if isinstance(config, Mapping) else load_config(config)
        return cls(specs, **options)

    def __repr__(self) -> str:
        return f"McpServers({sorted(self._specs)!r})"

    @property
    def specs(self) -> dict[str, ServerSpec]:
        return dict(self._specs)

    # --- life cycle ------------------------------------------------------------

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def start(self) -> None:
        """Start every configured server that is not running, concurrently.

        All or nothing: if one fails (or takes longer than its timeout), the
        others started here are stopped and an :class:`McpError` names the
        first failing server by name.
        """
        names = [n for n in sorted(self._specs) if not self._running(n)]
        await self._start(names)

    async def _start(self, names: list[str]) -> None:
        _require_sdk()
        from tapelog.mcp._connection import Connection, Limits

        limits = Limits(**self._limits)
        started = {
            n: Connection(self._specs[n], timeout=self.timeout, limits=limits) for n in names
        }
        outcomes = await asyncio.gather(
            *(c.start() for c in started.values()), return_exceptions=True
        )
        failed = [o for o in outcomes if isinstance(o, BaseException)]
        if failed:
            await asyncio.gather(*(c.close() for c in started.values()), return_exceptions=True)
            for outcome in failed:
                if not isinstance(outcome, McpError):
                    raise outcome
            raise failed[0]
        self._connections.update(started)

    def _running(self, name: str) -> bool:
        found = self._connections.get(name)
        return found is not None and found.state in ("starting", "ready")

    async def add(self, spec: ServerSpec) -> None:
        """Start one more server (or one that went away, again); its tools join at the next step."""
        if self._running(spec.name):
            raise McpError(f"an MCP server named {spec.name!r} is already running")
        old = self._connections.pop(spec.name, None)
        if old is not None:
            await old.close()
        previous = self._specs.get(spec.name)
        self._specs[spec.name] = spec
        try:
            await self._start([spec.name])
        except BaseException:
            if previous is None:
                del self._specs[spec.name]
            else:
                self._specs[spec.name] = previous
            raise

    async def remove(self, name: str) -> None:
        """Stop a server and forget it; its tools leave at the next step."""
        if name not in self._specs:
            raise McpError(f"there is no MCP server named {name!r}")
        del self._specs[name]
        found = self._connections.pop(name, None)
        if found is not None:
            await found.close()

    async def aclose(self) -> None:
        """Stop every server."""
        connections = list(self._connections.values())
        await asyncio.gather(*(c.close() for c in connections), return_exceptions=True)

    # --- the tool source -------------------------------------------------------

    def tools(self) -> list[Tool]:
        """The tools every running server offers now."""
        found: list[Tool] = []
        for name in sorted(self._connections):
            found.extend(self._connections[name].tools.values())
        return found

    async def refresh(self) -> None:
        """Wait for tool lists being fetched again after a change notice."""
        if self._connections:
            await asyncio.gather(*(c.settle() for c in self._connections.values()))

    def missing_tool(self, name: str) -> ToolOutcome | None:
        """Why ``name`` is not offered, when it names a server that went away."""
        server, sep, _ = name.partition("__")
        found = self._connections.get(server) if sep else None
        return found.missing(name) if found is not None else None

    def status(self) -> dict[str, ServerStatus]:
        """Every configured server's state and tools, by name."""
        result: dict[str, ServerStatus] = {}
        for name in sorted(self._specs):
            spec = self._specs[name]
            found = self._connections.get(name)
            if found is None:
                result[name] = ServerStatus(name=name, transport=spec.transport, state="new")
                continue
            result[name] = ServerStatus(
                name=name,
                transport=spec.transport,
                state=found.state,
                tools=tuple(sorted(found.tools)),
                skipped=dict(found.skipped),
                reason=found.reason if found.state == "closed" else None,
            )
        return result
