"""The mcp package's internal API: what other tapelog packages use of it, users do not.

Users import the public names from :mod:`tapelog.mcp` (docs/api.md). A package
that may import the mcp layer takes these from here, the one private module of
the package it may import (docs/architecture.md, tests/test_layout.py).
"""

from tapelog.mcp._config import load_config, parse_server_option

__all__ = [
    "load_config",
    "parse_server_option",
]
