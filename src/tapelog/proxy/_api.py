"""The per-request summary ``tapelog proxy`` prints (internal: docs/architecture.md)."""

from tapelog.proxy._summary import RequestSummary

__all__ = [
    "RequestSummary",
]
