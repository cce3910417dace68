"""The OTel extra's guard and endpoint for the CLI (internal: docs/architecture.md)."""

from tapelog.export._otlp import require_otel, traces_endpoint

__all__ = [
    "require_otel",
    "traces_endpoint",
]
