"""Reading a libpq connection string into what the PostgreSQL store keeps of it.

The store needs two things from the string besides passing it to libpq: every
secret it holds (registered with ``tapelog.log.register_secret`` at once, so
no error, log or output shows it, even the error refusing the string) and a
form it may show in its messages and ``repr`` (the parameters without the
secret ones). Kept apart from :mod:`tapelog.store._postgres` because it is
the one place the raw string is taken apart; :mod:`tapelog.store._pg_secrets`
finds the secrets.
"""

from __future__ import annotations

from tapelog._errors import StoreError
from tapelog.log import register_secret
from tapelog.store._pg_secrets import (
    SECRET_PARAMS,
    hide_secrets,
    refuse_split_userinfo,
    written_secrets,
)
from tapelog.store._pg_sql import first_line

__all__ = ["parse_conninfo"]


def parse_conninfo(conninfo: str) -> tuple[set[str], str]:
    """The string's secrets (each registered) and the string as it may be shown.

    Raises :class:`StoreError` (one sentence, no secret in it) for a string
    libpq refuses or a URI whose password libpq would cut in two.
    """
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    refuse_split_userinfo(conninfo)
    secrets = written_secrets(conninfo)
    try:
        params = conninfo_to_dict(conninfo)
    except psycopg.Error as exc:
        # libpq quotes the string in some of its messages (a URI's bad host,
        # a bad percent-escape), and with it any password it holds.
        for secret in secrets:
            register_secret(secret)
        reason = hide_secrets(first_line(exc), secrets)
        raise StoreError(
            f"invalid PostgreSQL connection string: {reason}; use "
            "'host=HOST dbname=NAME user=USER' or 'postgresql://USER@HOST/NAME'"
        ) from None
    for name in SECRET_PARAMS:
        value = params.pop(name, None)
        if value:
            secrets.add(str(value))
    for secret in secrets:
        register_secret(secret)
    return secrets, make_conninfo("", **params)  # never shows a secret parameter
