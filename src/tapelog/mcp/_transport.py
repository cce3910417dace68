"""Transport plumbing for MCP connections: a stdio server's stderr tail, and a
read stream that reports when a server's transport ends."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, TextIO

import anyio

__all__ = ["StderrTail", "WatchedStream", "watched"]

STDERR_KEEP = 4096
"""Bytes of a stdio server's stderr kept (the end), to explain a failed start."""


class Tail(asyncio.Protocol):
    """Keeps the last bytes a pipe delivered."""

    def __init__(self) -> None:
        self.data = bytearray()

    def data_received(self, data: bytes) -> None:
        self.data += data
        del self.data[:-STDERR_KEEP]


class StderrTail:
    """A pipe for a child's stderr, drained into a bounded tail."""

    def __init__(self) -> None:
        self._tail = Tail()
        self._transport: asyncio.BaseTransport | None = None
        self.writer: TextIO | None = None

    async def open(self) -> TextIO:
        read_fd, write_fd = os.pipe()
        reader = os.fdopen(read_fd, "rb", buffering=0)
        self.writer = os.fdopen(write_fd, "w", encoding="utf-8")
        loop = asyncio.get_running_loop()
        self._transport, _ = await loop.connect_read_pipe(lambda: self._tail, reader)
        return self.writer

    def spawned(self) -> None:
        """The child has its copy of the write end: close ours, so EOF follows its exit."""
        if self.writer is not None:
            self.writer.close()
            self.writer = None

    def close(self) -> None:
        self.spawned()
        if self._transport is not None:
            self._transport.close()

    def last_line(self) -> str:
        lines = self._tail.data.decode("utf-8", "replace").strip().splitlines()
        return lines[-1].strip()[-300:] if lines else ""


class WatchedStream:
    """A transport's read stream that reports its end (the server went away)."""

    def __init__(self, inner: Any, on_end: Callable[[], None]) -> None:
        self._inner = inner
        self._on_end = on_end

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            self._on_end()
            raise

    def __aiter__(self) -> WatchedStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> WatchedStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


@asynccontextmanager
async def watched(
    transport: AbstractAsyncContextManager[Any], on_end: Callable[[], None]
) -> AsyncIterator[Any]:
    async with transport as (read_stream, write_stream):
        yield WatchedStream(read_stream, on_end), write_stream
