"""tapelog's version, kept in this one place.

A root-level core module like :mod:`tapelog._errors`: every layer may import it
(the MCP client and the OpenTelemetry tracer name themselves with it), while
importing the root package ``tapelog`` would load the agent, the audit and the
stores with it. The build reads the same constant (``[tool.hatch.version]`` in
pyproject.toml), and ``tapelog.__version__`` re-exports it.
"""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
