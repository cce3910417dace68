"""Which store a command uses: ``--store``, else ``$TAPELOG_STORE``, else the default directory.

One value names either backend, so every command takes the same option and
works on both through the :class:`~tapelog.store.SessionStore` interface:

* ``postgresql://...`` or ``postgres://...``: a :class:`PostgresStore` (a libpq
  URI); an extra ``schema=NAME`` query parameter, which libpq itself does not
  know, picks the PostgreSQL schema (default ``tapelog``) and is taken out
  before the URI reaches libpq;
* a libpq keyword string, ``host=/tmp dbname=x user=y`` (its first word is
  ``KEYWORD=`` with a libpq keyword): a :class:`PostgresStore` too, with
  ``schema=NAME`` as one more word taken out the same way. Before this was
  read it named a directory that ``run`` created; a directory really named
  so is still reachable as ``./host=...``;
* anything else: a directory of JSONL files (:class:`JsonlStore`).

A URL's password is never shown: the store's errors and :func:`store_label`
leave it out.
"""

from __future__ import annotations

import os
import re
import urllib.parse
from pathlib import Path
from typing import Final

from tapelog._errors import StoreError
from tapelog.store import JsonlStore, PostgresStore, SessionStore

__all__ = ["default_store", "open_store", "store_label"]

_POSTGRES_SCHEMES: Final = frozenset({"postgresql", "postgres"})
_SCHEME: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")
_DEFAULT_SCHEMA: Final = "tapelog"
_LIBPQ_KEYWORDS: Final = frozenset(
    {
        "host",
        "hostaddr",
        "port",
        "dbname",
        "user",
        "password",
        "passfile",
        "service",
        "sslmode",
        "connect_timeout",
        "application_name",
        "options",
        "target_session_attrs",
    }
)
_KEYWORD_FORM: Final = re.compile(r"\s*([a-z_]+)\s*=")
_SCHEMA_WORD: Final = re.compile(r"(?:^|\s)schema\s*=\s*('[^']*'|\S*)")


def default_store() -> str:
    """``$TAPELOG_STORE``, else ``$XDG_DATA_HOME/tapelog/sessions``
    (``~/.local/share/tapelog/sessions``)."""
    env = os.environ.get("TAPELOG_STORE")
    if env:
        return env
    data_home = os.environ.get("XDG_DATA_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "share"
    )
    return str(Path(data_home) / "tapelog" / "sessions")


def open_store(value: str | None) -> SessionStore:
    """The store ``value`` names (``None``: :func:`default_store`); connects to nothing yet."""
    spec = value or default_store()
    scheme, sep, _ = spec.partition("://")
    if sep and scheme.lower() in _POSTGRES_SCHEMES:
        conninfo, schema = _split_schema(spec)
        return PostgresStore(conninfo, schema=schema)
    keyword = _KEYWORD_FORM.match(spec)
    if not sep and keyword is not None and keyword.group(1) in _LIBPQ_KEYWORDS:
        conninfo, schema = _split_schema_word(spec)
        return PostgresStore(conninfo, schema=schema)
    if sep and _SCHEME.fullmatch(scheme):
        raise StoreError(
            f"the store {scheme}://... is not supported; give a directory or a "
            "postgresql://USER@HOST/DBNAME URL"
        )
    root = Path(spec)
    if root.is_file():
        raise StoreError(f"the store {spec} is a file; give a directory or a postgresql:// URL")
    return JsonlStore(root)


def store_label(store: SessionStore) -> str:
    """How to name the store to a user: its directory, or its database without a password."""
    if isinstance(store, JsonlStore):
        return str(store.root)
    return repr(store)


def _split_schema_word(conninfo: str) -> tuple[str, str]:
    """A keyword string without its ``schema=NAME`` word, and that schema."""
    schemas = [m.group(1).strip("'") for m in _SCHEMA_WORD.finditer(conninfo)]
    if len(schemas) > 1:
        raise StoreError(
            f"the store gives schema= {len(schemas)} times; give the PostgreSQL schema once"
        )
    kept = _SCHEMA_WORD.sub(" ", conninfo).strip()
    return kept, schemas[0] if schemas else _DEFAULT_SCHEMA


def _split_schema(url: str) -> tuple[str, str]:
    """The URL without its ``schema=`` query parameter, and that schema.

    The query is split by hand, not re-encoded, so every other parameter
    reaches libpq exactly as written.
    """
    base, question, query = url.partition("?")
    kept: list[str] = []
    schemas: list[str] = []
    for item in query.split("&") if question else []:
        name, _, text = item.partition("=")
        if name == "schema":
            schemas.append(urllib.parse.unquote(text))
        elif item:
            kept.append(item)
    if len(schemas) > 1:
        raise StoreError(
            f"the store URL gives schema= {len(schemas)} times; give the PostgreSQL schema once"
        )
    schema = schemas[0] if schemas else _DEFAULT_SCHEMA
    return (f"{base}?{'&'.join(kept)}" if kept else base), schema
