"""The ``mcpServers`` config readers the CLI uses (internal: docs/architecture.md)."""

from tapelog.mcp._config import load_config, parse_server_option

__all__ = [
    "load_config",
    "parse_server_option",
]
