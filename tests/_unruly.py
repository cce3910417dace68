"""A session that logs what no loop could: for tests of the reports about such logs.

``Session.append`` refuses an event that breaks a structural rule
(:class:`tapelog.log.LogRules`), so the logs a forger, a hand edit or an old
bug leave behind are built here with the rules only reported, never enforced:
the bytes are then fed to ``verify`` or ``load``, which must judge them.
"""

from __future__ import annotations

from tapelog import Session

__all__ = ["unruly"]


def unruly(session: Session) -> Session:
    """``session``, from now on appending events that break the rules as well."""
    session._rule_breaks = lambda event, error: None
    return session
