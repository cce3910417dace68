"""The loop's incremental checker and its switch, for the agent, the audit and the proxy
(internal: docs/architecture.md).
"""

from tapelog.checker._checker import RequestChecker, check_enabled

__all__ = [
    "RequestChecker",
    "check_enabled",
]
