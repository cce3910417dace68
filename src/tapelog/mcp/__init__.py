"""Tools from MCP servers, through the official ``mcp`` SDK (docs/tools.md).

Configure servers as other clients do (``{"mcpServers": {...}}``), start them
with :class:`McpServers`, and pass that to an agent's tools::

    async with McpServers.from_config("mcp.json") as servers:
        agent = Agent(session, client, config=config, tools=[*my_tools, servers])

Importing this package does not import the SDK; starting a server does (it
is the optional extra ``tapelog[mcp]``).
"""

from tapelog._errors import McpError
from tapelog.mcp._config import ServerSpec
from tapelog.mcp._servers import McpServers, ServerStatus

__all__ = [
    "McpError",
    "McpServers",
    "ServerSpec",
    "ServerStatus",
]
