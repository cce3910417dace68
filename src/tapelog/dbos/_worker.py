"""Turns as DBOS workflows: the queue, the worker that runs them, enqueueing one.

A turn is the workflow ``tapelog.turn`` (arguments: session id and prompt) on
the queue ``tapelog_turns``, partitioned by session id with one turn per
partition at a time, so a session's turns run one after the other, in the
order they were enqueued, while turns of different sessions run at once on
any worker. The workflow's id is the turn's idempotency key: it is what the
prompt's ``user/message`` carries (:mod:`tapelog.dbos._keyed`), and enqueueing
the same id twice gives the same workflow.

The workflow has one step, which opens (or creates) the session, makes the
agent (repair closes what a crash left open) and runs the keyed turn. DBOS
records the step's outcome; the log makes the step itself exactly once when
it runs again. DBOS keeps its tables in the ``dbos`` schema of the store's
database, next to tapelog's.

**A dead worker's turns.** Without DBOS's hosted control plane, DBOS recovers
the pending workflows of an executor only when a process with the same
executor id starts. Here every worker has an executor id of its own and holds,
for as long as it lives, the store's write lock on the id ``worker-<executor
id>`` (a reservation of a session id no session has: PostgreSQL releases it
when the worker's connection ends, even when the worker was SIGKILLed). Each
worker looks every ``reap_interval`` seconds for pending turns whose executor
holds no such lock, and hands them back to the queue (DBOS's recovery, which
re-enqueues a workflow only while it is still pending on the executors named
dead, so two workers doing it at once recover it once).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Final

from tapelog._errors import SessionLockedError, StoreError
from tapelog._version import __version__
from tapelog.agent import Agent
from tapelog.dbos._keyed import run_keyed_turn
from tapelog.log._api import Session
from tapelog.store import PostgresStore, Reservation, SessionStore, SessionWriter

__all__ = [
    "QUEUE",
    "WORKFLOW",
    "AgentFactory",
    "TurnQueue",
    "Worker",
    "database_url",
]

QUEUE: Final = "tapelog_turns"
WORKFLOW: Final = "tapelog.turn"
_APP: Final = "tapelog"
_VERSION: Final = f"tapelog-{__version__}"  # every worker and client must agree on it
_PRESENCE: Final = "worker-"
_log = logging.getLogger(__name__)

AgentFactory = Callable[[Session, SessionWriter], AbstractAsyncContextManager[Agent]]
"""Makes the agent of one turn over an opened session and its writer (the
provider client, system prompt and tools a worker runs turns with); it is left
when the turn ends, so a client it opened is closed there."""


def database_url(store: PostgresStore) -> str:
    """The store's database as the SQLAlchemy URL DBOS connects with (every libpq
    parameter in the query, so a Unix-socket directory or a service works too)."""
    from psycopg.conninfo import conninfo_to_dict
    from sqlalchemy.engine import URL

    params = {k: str(v) for k, v in conninfo_to_dict(store.conninfo).items()}
    user = params.pop("user", None)
    password = params.pop("password", None)
    database = params.pop("dbname", None) or user or "postgres"  # libpq's default
    url = URL.create(
        "postgresql+psycopg", username=user, password=password, database=database, query=params
    )
    return url.render_as_string(hide_password=False)


@dataclass
class _Runtime:
    store: SessionStore
    agents: AgentFactory
    lock_wait: float


_runtime: _Runtime | None = None  # the worker this process runs (DBOS is one per process)
_registered: dict[str, Any] = {}


def _turn_step(session_id: str, prompt: str, key: str) -> dict[str, Any]:
    runtime = _runtime
    if runtime is None:
        raise StoreError("no tapelog worker runs in this process")
    return asyncio.run(_in_store(runtime, session_id, prompt, key))


async def _in_store(runtime: _Runtime, session_id: str, prompt: str, key: str) -> dict[str, Any]:
    writer = _open(runtime, session_id)
    try:
        async with runtime.agents(writer.session, writer) as agent:
            return await run_keyed_turn(agent, prompt, key)
    finally:
        writer.close()


def _open(runtime: _Runtime, session_id: str) -> SessionWriter:
    """The session's writer, creating the session if it is new; a session still
    held (its last worker's connection not yet gone) is waited for."""
    store, deadline = runtime.store, time.monotonic() + runtime.lock_wait
    while True:
        try:
            reservation = store.reserve(session_id)
            if reservation is None:
                return store.open(session_id)[1]
            return store.create(Session(session_id), reservation=reservation)
        except SessionLockedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _register() -> Any:
    """The workflow, registered with DBOS once per process (before launch)."""
    if "workflow" not in _registered:
        from dbos import DBOS

        step = DBOS.step(name="tapelog.turn.run")(_turn_step)

        @DBOS.workflow(name=WORKFLOW, max_recovery_attempts=1000)
        def turn(session_id: str, prompt: str) -> dict[str, Any]:
            key = DBOS.workflow_id  # the turn's idempotency key (TurnQueue.enqueue)
            if key is None:
                raise StoreError("a tapelog turn runs only as a DBOS workflow")
            return step(session_id, prompt, key)

        _registered["workflow"] = turn
    return _registered["workflow"]


class Worker:
    """Runs queued turns in this process until :meth:`stop` (one per process:
    DBOS is). ``concurrency``: turns at once here; ``lock_wait``: how long a turn
    waits for a session whose last writer is still being let go."""

    def __init__(
        self,
        store: PostgresStore,
        agents: AgentFactory,
        *,
        concurrency: int = 4,
        reap_interval: float = 1.0,
        lock_wait: float = 60.0,
        system_schema: str = "dbos",
    ) -> None:
        self.store = store
        self.executor_id = f"tapelog-{uuid.uuid4().hex}"
        self._agents = agents
        self._concurrency = concurrency
        self._reap_interval = reap_interval
        self._lock_wait = lock_wait
        self._schema = system_schema
        self._presence: Reservation | None = None
        self._stop = threading.Event()
        self._reaper: threading.Thread | None = None

    def start(self) -> None:
        """Hold this worker's presence lock, launch DBOS, start looking for dead workers."""
        global _runtime
        from dbos import DBOS, DBOSConfig

        if _runtime is not None:
            raise StoreError("a tapelog worker already runs in this process")
        self._presence = self.store.reserve(_PRESENCE + self.executor_id)
        if self._presence is None:
            raise StoreError(f"the worker id {self.executor_id} is taken by a session")
        _runtime = _Runtime(self.store, self._agents, self._lock_wait)
        config: DBOSConfig = {
            "name": _APP,
            "system_database_url": database_url(self.store),
            "dbos_system_schema": self._schema,
            "executor_id": self.executor_id,
            "application_version": _VERSION,
            "log_level": "WARNING",
            # its connections: the queue's threads and this worker's turns (each
            # turn's session holds one more, from the store)
            "sys_db_pool_size": self._concurrency + 4,
        }
        DBOS(config=config)
        _register()
        DBOS.launch()
        DBOS.register_queue(  # after launch: its settings are stored in the database
            QUEUE,
            partition_concurrency=1,
            worker_concurrency=self._concurrency,
            polling_interval_sec=0.2,
        )
        self._reaper = threading.Thread(target=self._reap, name="tapelog-reaper", daemon=True)
        self._reaper.start()

    def _reap(self) -> None:
        from dbos import DBOS

        while not self._stop.wait(self._reap_interval):
            try:
                pending = DBOS.list_workflows(
                    status="PENDING", queue_name=QUEUE, load_input=False, load_output=False
                )
                others = {w.executor_id for w in pending if w.executor_id} - {self.executor_id}
                dead = [e for e in sorted(others) if not self.store.active(_PRESENCE + e)]
                if dead:
                    DBOS._recover_pending_workflows(dead)
            except Exception as exc:  # a dropped connection: try again next time
                _log.warning("looking for dead workers failed: %s", exc)

    def stop(self) -> None:
        """Stop looking, shut DBOS down (turns in flight are recovered elsewhere)."""
        global _runtime
        from dbos import DBOS

        self._stop.set()
        if self._reaper is not None:
            self._reaper.join()
        DBOS.destroy()
        _runtime = None
        if self._presence is not None:
            self._presence.release()
            self._presence = None


class TurnQueue:
    """Enqueues turns for the workers of a store's database, from any process."""

    def __init__(self, store: PostgresStore, *, system_schema: str = "dbos") -> None:
        from dbos import DBOSClient

        self._client = DBOSClient(
            system_database_url=database_url(store), dbos_system_schema=system_schema
        )
        self._schema = system_schema

    def enqueue(self, session_id: str, prompt: str, *, key: str | None = None) -> str:
        """Queue one turn of ``prompt`` on ``session_id`` (created by the turn if
        new); its key (default: a new one), which is also the workflow's id."""
        from dbos import EnqueueOptions

        key = key or f"turn-{uuid.uuid4().hex}"
        options: EnqueueOptions = {
            "workflow_name": WORKFLOW,
            "queue_name": QUEUE,
            "workflow_id": key,
            "queue_partition_key": session_id,
            "app_version": _VERSION,
        }
        import psycopg
        from sqlalchemy.exc import ProgrammingError

        try:
            self._client.enqueue(options, session_id, prompt)
        except ProgrammingError as exc:
            if not isinstance(exc.orig, psycopg.errors.UndefinedTable):
                raise
            raise StoreError(
                f"the turn queue's tables (PostgreSQL schema {self._schema}) are not in the "
                "database yet: start a `tapelog worker` on it first, which creates them"
            ) from None
        return key

    def statuses(self, keys: Sequence[str]) -> dict[str, str]:
        """Each turn's DBOS status (``ENQUEUED``, ``PENDING`` while it runs,
        ``SUCCESS``, ``ERROR``...), read in one query."""
        found = self._client.list_workflows(
            workflow_ids=list(keys), load_input=False, load_output=False
        )
        return {w.workflow_id: str(w.status) for w in found}

    def result(self, key: str) -> dict[str, Any]:
        """The outcome of the turn ``key`` (waits for it), as ``run_keyed_turn`` returns it."""
        return dict(self._client.retrieve_workflow(key).get_result())

    def close(self) -> None:
        self._client.destroy()

    def __enter__(self) -> TurnQueue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
