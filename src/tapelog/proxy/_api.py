"""The proxy package's internal API: what other tapelog packages use of it, users do not.

Users import the public names from :mod:`tapelog.proxy` (docs/api.md). A package
that may import the proxy layer takes these from here, the one private module of
the package it may import (docs/architecture.md, tests/test_layout.py).
"""

from tapelog.proxy._summary import RequestSummary

__all__ = [
    "RequestSummary",
]
