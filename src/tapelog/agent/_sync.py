"""Running turns from synchronous code (``Agent.run_sync``).

Each agent runs its synchronous turns on one private event loop, created at
the first ``run_sync`` and reused by every later one. A fresh loop per call
would break the second call: an ``httpx.AsyncClient`` keeps idle connections
bound to the loop that opened them (after an error answer, for one), and
reusing one from a closed loop fails with "Event loop is closed". The loop is
closed when the agent is garbage-collected, or at interpreter exit.

Called while an event loop is running in the thread (async code, a notebook
cell), ``run_sync`` cannot block that loop to run its own: it refuses with a
:class:`TapelogError` naming ``await agent.run(...)`` instead. A Ctrl-C
during ``run_sync`` cancels the turn, which still closes its log
(``turn/end`` with reason ``error``, ``CancelledError``), then raises
``KeyboardInterrupt`` (as :class:`asyncio.Runner` does).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from tapelog._errors import TapelogError

__all__ = ["SyncRunner"]

T = TypeVar("T")


def _close(runner: asyncio.Runner) -> None:
    """Close the private loop (a finalizer: never raises)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        elsewhere = False
    else:
        elsewhere = True
    with contextlib.suppress(RuntimeError):  # e.g. no thread left at interpreter exit
        if elsewhere:
            # Collected while another loop runs in this thread: ours cannot run
            # its clean-up now, and nothing is scheduled on it; close it as it is.
            runner.get_loop().close()
        else:
            runner.close()


class SyncRunner:
    """One agent's private event loop for ``run_sync`` (see the module docstring)."""

    def __init__(self) -> None:
        self._runner: asyncio.Runner | None = None
        self._busy = threading.Lock()  # one synchronous turn at a time, from any thread

    def run(self, make: Callable[[], Coroutine[Any, Any, T]], what: str) -> T:
        """Run the coroutine ``make()`` returns to completion; ``what`` names the
        awaitable form in the error raised inside a running loop."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise TapelogError(
                "Agent.run_sync cannot run inside a running event loop (async code or a "
                f"notebook cell); use `{what}` there instead"
            )
        if not self._busy.acquire(blocking=False):
            # Its loop is running that turn: a second run on it would be queued
            # on the loop and start whenever the loop next runs.
            raise TapelogError(
                "Agent.run_sync is already running a turn of this agent in another thread; "
                "wait for it to return, or give each thread its own Agent"
            )
        try:
            if self._runner is None:
                self._runner = asyncio.Runner()
                weakref.finalize(self, _close, self._runner)
            return self._runner.run(make())
        finally:
            self._busy.release()
