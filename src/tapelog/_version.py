"""tapelog's version, kept in this one place.

A root-level core module like :mod:`tapelog._errors`: every layer may import it
(the MCP client, the OpenTelemetry tracer and the CLI name themselves with
it). Taking it from the root package ``tapelog`` instead makes a lower layer
depend on the top one, which imports every layer: an import cycle, where the
name exists only once the root's own imports have finished. The build reads
the same constant (``[tool.hatch.version]`` in pyproject.toml), and
``tapelog.__version__`` re-exports it.
"""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
