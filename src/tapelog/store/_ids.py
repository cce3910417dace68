"""Session id rules.

A session id names a file (JSONL) or a row (PostgreSQL), and arrives from
users on the command line, so it is checked before it touches a path: only
characters that are safe in every filesystem and URL, never a path separator,
never ``..``, never a leading dot (which would hide the file or collide with
the store's own ``.locks`` directory).
"""

from __future__ import annotations

import re
from typing import Final

from tapelog._errors import InvalidSessionIdError

__all__ = ["MAX_SESSION_ID_LENGTH", "validate_session_id"]

MAX_SESSION_ID_LENGTH: Final = 128

_ALLOWED: Final = re.compile(r"[A-Za-z0-9._-]+")
_RULE: Final = (
    "a session id is 1 to 128 characters from A-Z, a-z, 0-9, '.', '_' and '-', "
    "and must not start with '.' or contain '..'"
)


def validate_session_id(session_id: object) -> str:
    """Return ``session_id`` unchanged if it is a legal id; raise otherwise."""
    if not isinstance(session_id, str):
        raise InvalidSessionIdError(
            f"session id must be a string, got {type(session_id).__name__}; {_RULE}"
        )
    problem: str | None = None
    if not session_id:
        problem = "is empty"
    elif len(session_id) > MAX_SESSION_ID_LENGTH:
        problem = f"is {len(session_id)} characters long"
    elif "/" in session_id or "\\" in session_id:
        problem = "contains a path separator"
    elif _ALLOWED.fullmatch(session_id) is None:
        bad = next(c for c in session_id if _ALLOWED.fullmatch(c) is None)
        problem = f"contains the character {bad!r}"
    elif session_id.startswith("."):
        problem = "starts with '.'"
    elif ".." in session_id:
        problem = "contains '..'"
    if problem is not None:
        shown = session_id if len(session_id) <= 40 else session_id[:37] + "..."
        raise InvalidSessionIdError(f"invalid session id {shown!r}: it {problem}; {_RULE}")
    return session_id
