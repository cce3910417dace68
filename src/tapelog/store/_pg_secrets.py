"""Secrets in a PostgreSQL connection string: found by hand, never shown.

A connection string may hold a password (``postgresql://user:pw@host/db`` or
``password=pw``) and libpq quotes the string in some of its errors. The store
registers every secret found here (``tapelog.log.register_secret``) and hides
them in the errors it raises, and refuses a URI libpq would cut inside its
password, whose pieces no redaction could know.
"""

from __future__ import annotations

import re
import urllib.parse
from typing import Final

from tapelog._errors import StoreError
from tapelog.log import redact

__all__ = ["SECRET_PARAMS", "hide_secrets", "refuse_split_userinfo", "written_secrets"]

SECRET_PARAMS: Final = ("password", "sslpassword", "oauth_client_secret")
"""libpq parameters whose values are secrets (``passfile``, ``sslkey`` and the
other ``ssl*`` files are paths, shown like any other parameter)."""
_SECRET_PARAM: Final = re.compile(
    r"(?:^|[?&\s])(?:" + "|".join(SECRET_PARAMS) + r")\s*=\s*('[^']*'|[^&\s]*)"
)


def refuse_split_userinfo(conninfo: str) -> None:
    """Refuse a URI whose ``user:password@`` holds an unencoded ``/`` or ``@``.

    libpq ends the authority at the first ``/`` and the user part at the first
    ``@``, so such a password is cut in two: one piece becomes a host, port or
    database name that libpq and tapelog's errors then print, and no
    redaction can know the pieces. The message names no part of the URL.
    """
    scheme, sep, rest = conninfo.partition("://")
    if not sep or scheme.lower() not in ("postgresql", "postgres"):
        return
    authority = rest.split("?", 1)[0].split("#", 1)[0]
    if "@" not in authority:
        return
    userinfo = authority.rsplit("@", 1)[0]
    if "/" in userinfo or "@" in userinfo:
        raise StoreError(
            "the PostgreSQL URL's user or password holds an unencoded '/' or '@', so libpq "
            "would read part of it as the host or the database; percent-encode them ('/' as "
            "%2F, '@' as %40), or keep the password in PGPASSWORD or ~/.pgpass"
        )


def written_secrets(conninfo: str) -> set[str]:
    """Every secret ``conninfo`` may hold, found by hand (the string may be one
    libpq cannot parse): a URI's ``user:password@`` and any ``password=``,
    ``sslpassword=`` or ``oauth_client_secret=`` parameter (URI query or
    keyword form), each as written and percent-decoded."""
    found: set[str] = set()
    _, sep, rest = conninfo.partition("://")
    if sep and "@" in (authority := rest.split("?", 1)[0]):
        found.add(authority.rsplit("@", 1)[0].partition(":")[2])
    found.update(m.group(1).strip("'") for m in _SECRET_PARAM.finditer(conninfo))
    found |= {urllib.parse.unquote(p) for p in found}
    return found - {""}


def hide_secrets(text: str, secrets: set[str], *, shortest: int = 1) -> str:
    """``text`` with each of ``secrets`` at least ``shortest`` characters long (and
    any registered secret, in any of its forms) replaced by ``***``."""
    for secret in sorted(secrets, key=len, reverse=True):
        if len(secret) >= shortest:
            text = text.replace(secret, "***")
    return redact(text)
