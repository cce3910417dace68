"""Tools from MCP servers, through the official ``mcp`` SDK (docs/tools.md).

Configure servers as other clients do (``{"mcpServers": {...}}``), start them
with :class:`McpServers`, and pass that to an agent's tools::

    async with McpServers.from_config("mcp.json") as servers:
        agent = Agent(session, client, config=config, tools=[*my_tools, servers])

Importing this package does not import the SDK; starting a server does (it
is the optional extra ``tapelog[mcp]``).
"""

from tapelog._errors import McpError
from tapelog.mcp._config import (
    ServerSpec,
    load_config,
    parse_config,
    parse_server_option,
)
from tapelog.mcp._mapping import canonical_schema, namespaced, render_result
from tapelog.mcp._servers import DEFAULT_TIMEOUT, McpServers, ServerStatus

__all__ = [
    "DEFAULT_TIMEOUT",
    "McpError",
    "McpServers",
    "ServerSpec",
    "ServerStatus",
    "canonical_schema",
    "load_config",
    "namespaced",
    "parse_config",
    "parse_server_option",
    "render_result",
]
