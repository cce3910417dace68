"""Test helpers at the network edge shared by the CLI tests."""

from __future__ import annotations

import asyncio
import threading
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["Gate"]


class Gate:
    """ASGI middleware at the network edge: holds a stream once ``marker`` went out.

    The emulator's frames pass through unchanged; after the body frame that
    carries ``marker`` the response waits until :attr:`release` is set (or a
    minute passes), so a turn is reliably in flight for as long as the test needs.
    """

    def __init__(self, marker: bytes) -> None:
        self.app: ASGIApp | None = None
        self.marker = marker
        self.holding = threading.Event()
        self.release = threading.Event()

    def wrap(self, app: ASGIApp) -> ASGIApp:
        """The middleware factory Starlette calls when it builds its stack."""
        self.app = app
        return self

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert self.app is not None

        async def gated_send(message: Message) -> None:
            await send(message)
            if message["type"] == "http.response.body" and self.marker in message.get("body", b""):
                self.holding.set()
                deadline = time.monotonic() + 60
                while not self.release.is_set() and time.monotonic() < deadline:
                    await asyncio.sleep(0.02)

        await self.app(scope, receive, gated_send)
