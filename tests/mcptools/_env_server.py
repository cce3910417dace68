"""A stdio MCP server that leaks its environment's token everywhere it can.

Run by the tests as ``python _env_server.py``: the token (``API_TOKEN``) is in a
tool description, a result and an error; tapelog must keep it out of the log.
``crash`` makes the process exit in the middle of a call.
"""

import os

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

TOKEN = os.environ.get("API_TOKEN", "")
server = MCPServer("env", log_level="ERROR")


@server.tool(description=f"Says the token ({TOKEN}).")
def whoami() -> str:
    return f"I am using the token {TOKEN}"


@server.tool()
def fail() -> str:
    """Fails, quoting the token."""
    raise ToolError(f"token {TOKEN} was refused")


@server.tool()
def crash() -> str:
    """Exits the server process in the middle of the call."""
    os._exit(3)


if __name__ == "__main__":
    server.run()
