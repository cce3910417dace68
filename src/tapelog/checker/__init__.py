"""The invariant checker: every request is rebuilt from the log before it is sent.

See :mod:`tapelog.checker._checker`; docs/architecture.md explains where it sits
(between the request builders and the wires, below the agent and the audit).
"""

from tapelog.checker._checker import check_request

__all__ = [
    "check_request",
]
