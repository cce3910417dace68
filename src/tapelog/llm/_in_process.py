"""In-process transports: providers that answer inside this process, by name.

``make_client`` for such a provider, given neither a base URL nor an HTTP
client, sends through a fresh transport from the factory registered here (no
socket, no key). The llm layer must not depend on what plugs in: the emulator
sits above it, so it is the root package ``tapelog`` (the top layer) that
registers the emulator's ASGI transport, importing the emulator only when a
client first asks for it. Tests and applications register their own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import httpx

__all__ = [
    "TransportFactory",
    "in_process_transport",
    "register_in_process_transport",
    "unregister_in_process_transport",
]

TransportFactory = Callable[[], httpx.AsyncBaseTransport]
"""Makes one transport per client: clients share no state through it."""

_FACTORIES: dict[str, TransportFactory] = {}
_LOCK = threading.Lock()


def register_in_process_transport(provider: str, factory: TransportFactory) -> None:
    """Serve ``provider`` in process: ``make_client`` without ``base_url`` or
    ``http_client`` sends through ``factory()``. A second registration replaces
    the first."""
    with _LOCK:
        _FACTORIES[provider] = factory


def unregister_in_process_transport(provider: str) -> None:
    """Forget ``provider``'s in-process transport (nothing happens when it has none)."""
    with _LOCK:
        _FACTORIES.pop(provider, None)


def in_process_transport(provider: str) -> httpx.AsyncBaseTransport | None:
    """A fresh transport for ``provider``, ``None`` when none is registered."""
    with _LOCK:
        factory = _FACTORIES.get(provider)
    return factory() if factory is not None else None
