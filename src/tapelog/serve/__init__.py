"""``tapelog serve``: a read-only web view of every session in a store, live.

:func:`create_app` is the Starlette app the command serves on loopback: the
sessions page (from a small index that never replays a log to draw the list),
each session's page (the very views of ``tapelog report``), a diff of any two
requests with their exact bodies, and live updates by server-sent events as a
writer flushes. docs/serve.md describes the pages, the index and how it stays
correct, and the security properties.

Importing this package imports Starlette (the web stack); the library's other
packages never import it.
"""

from tapelog.serve._app import create_app

__all__ = [
    "create_app",
]
