"""What the top layer wires into the layers below it.

A lower layer never imports a higher one, not even lazily inside a function
(tests/test_layout.py). Where a lower layer needs something from above, it
keeps a registry and the root package ``tapelog``, the top layer, fills it
when it is imported: ``make_client`` for the ``emulator`` provider without a
base URL reaches a fresh in-process emulator this way, and the llm package
knows nothing of the emulator.
"""

from __future__ import annotations

import httpx

from tapelog.llm._api import register_in_process_transport

__all__ = ["register_in_process_providers"]


def _in_process_emulator() -> httpx.AsyncBaseTransport:
    """A fresh emulator's ASGI transport: each client its own emulator, as each
    would have its own server. The emulator and its web stack are imported
    only when a client first asks for one."""
    from tapelog.emulator import Emulator

    return Emulator().transport()


def register_in_process_providers() -> None:
    """Register the emulator as the ``emulator`` provider's in-process transport."""
    register_in_process_transport("emulator", _in_process_emulator)
