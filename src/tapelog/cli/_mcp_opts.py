"""``--mcp-config FILE`` and ``--mcp NAME=COMMAND`` for ``run`` and ``chat``.

The specs are parsed before anything is opened or stored (a bad config is one
line, and nothing is logged); the servers start before a new session is
stored, so a server that does not start leaves no empty session behind.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

from tapelog.agent import Tool, Toolset
from tapelog.cli._terminal import terminal_text
from tapelog.mcp import McpError, McpServers, ServerSpec
from tapelog.mcp._api import load_config, parse_server_option

__all__ = ["mcp_options", "mcp_specs", "start_mcp", "with_mcp"]

F = TypeVar("F", bound=Callable[..., Any])

_QUIET = logging.NullHandler()


def mcp_options(func: F) -> F:
    """Add ``--mcp-config`` and ``--mcp`` (both repeatable)."""
    func = click.option(
        "--mcp",
        "mcp",
        multiple=True,
        metavar="NAME=COMMAND",
        help=(
            "Run an MCP server over stdio (or NAME=URL for streamable HTTP) and offer its tools "
            'as NAME__TOOL; repeatable, e.g. --mcp time="mcp-server-time --local-timezone UTC".'
        ),
    )(func)
    return click.option(
        "--mcp-config",
        "mcp_config",
        multiple=True,
        type=click.Path(dir_okay=False, path_type=Path),
        metavar="FILE",
        help='MCP servers from a JSON file ({"mcpServers": {...}}, see docs/tools.md); repeatable.',
    )(func)


def mcp_specs(configs: Sequence[Path], servers: Sequence[str]) -> list[ServerSpec]:
    """Every server the options name; an :class:`McpError` (one line) for a bad one."""
    specs: list[ServerSpec] = []
    for path in configs:
        specs.extend(load_config(path))
    specs.extend(parse_server_option(value) for value in servers)
    seen: set[str] = set()
    for spec in specs:
        if spec.name in seen:
            raise McpError(f"two MCP servers are named {spec.name!r}; give each its own name")
        seen.add(spec.name)
    return specs


async def start_mcp(specs: Sequence[ServerSpec]) -> McpServers | None:
    """Start the servers (``None`` without any) and say on stderr what each offers."""
    if not specs:
        return None
    # The SDK logs through `logging`; without a handler the last resort would
    # print its warnings (which may quote server output) raw on stderr.
    logging.getLogger("mcp").addHandler(_QUIET)
    servers = McpServers(specs)
    await servers.start()
    for status in servers.status().values():
        offered = f"{len(status.tools)} tool{'' if len(status.tools) == 1 else 's'}"
        click.echo(terminal_text(f"mcp: {status.name} offers {offered}"), err=True)
        for tool, why in status.skipped.items():
            click.echo(
                terminal_text(f"warning: mcp: {status.name}: tool {tool!r} not offered: {why}"),
                err=True,
            )
    return servers


def with_mcp(tools: Iterable[Tool], servers: McpServers | None) -> Toolset:
    """The built-in tools plus the servers' (which change while the agent runs)."""
    toolset = Toolset(tools)
    if servers is not None:
        toolset.include(servers)
    return toolset
