"""The export package's internal API: what other tapelog packages use of it, users do not.

Users import the public names from :mod:`tapelog.export` (docs/api.md). A package
that may import the export layer takes these from here, the one private module of
the package it may import (docs/architecture.md, tests/test_layout.py).
"""

from tapelog.export._otlp import require_otel, traces_endpoint

__all__ = [
    "require_otel",
    "traces_endpoint",
]
