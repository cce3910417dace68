"""The checker package's internal API: what other tapelog packages use of it, users do not.

Users import the public names from :mod:`tapelog.checker` (docs/api.md). A package
that may import the checker layer takes these from here, the one private module of
the package it may import (docs/architecture.md, tests/test_layout.py).
"""

from tapelog.checker._checker import RequestChecker, check_enabled

__all__ = [
    "RequestChecker",
    "check_enabled",
]
