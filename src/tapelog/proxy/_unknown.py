"""The proxy's answer to a path it does not serve (``GET /v1/models``, a typo).

A client that asks for an endpoint the proxy does not record gets a 404 in
its own API's error shape (so its SDK raises its usual error with the
sentence as the message), saying which endpoints the proxy serves and what
to do; the proxy's console says it too, once per method and path, since the
client may not show it.
"""

from __future__ import annotations

from collections.abc import Iterable

from tapelog.proxy._upstream import Upstream

__all__ = ["unknown_endpoint"]


def unknown_endpoint(method: str, path: str, upstream: Upstream, served: Iterable[str]) -> str:
    """The sentence for ``method path``, which none of ``served`` is."""
    paths = ", ".join(f"POST {p}" for p in served)
    shown = path if len(path) <= 80 else path[:79] + "…"
    return (
        f"tapelog proxy does not serve {method} {shown}: it records {paths} (forwarded to "
        f"{upstream.provider}); point the client's base URL at the proxy's /v1 and use "
        "those APIs, or call the provider directly for anything else (models, files, ...)"
    )
