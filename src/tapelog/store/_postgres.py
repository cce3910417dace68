"""The PostgreSQL store: sessions shared by many machines through one database.

Schema (created on first ``create``, idempotently, in its own PostgreSQL schema)::

    sessions(id text PK, format_version int, created bigint, cwd text,
             parent text, seed_length int, header bytea)
    events(session_id text FK, seq int, line bytea, PK (session_id, seq))

``header`` and ``line`` hold the exact bytes a JSONL file would hold on those
lines (``header_line(info)`` and ``Event.encode()``), so the two backends store
the same bytes and loading goes through the same scanner and replay
(:func:`read_session_bytes`), with the same errors and line numbers (line 1 is
the header, line n is seq n - 2). The other ``sessions`` columns are copies for
queries; the header bytes are what loading trusts.

One writer per session: the writer's connection holds a session-level advisory
lock on a 64-bit hash of (schema, id), so a second writer on any machine is
refused, and the server releases the lock when the holder's connection ends,
even if its process was killed. The primary key is the second line of
defence: if a writer ever lost its lock (a dropped connection) and another
appended meanwhile, its next insert collides and is refused instead of forking
the log (optimistic concurrency). A flush is one multi-row insert (one
statement, one transaction, one round trip however many rows), so an event is
durable exactly when its flush commits; the followers' notification follows in
a transaction of its own.

psycopg is an optional dependency (``pip install 'tapelog[postgres]'``): it is
imported when a store is constructed, not when ``tapelog.store`` is. The
writer is :mod:`tapelog.store._pg_writer`'s, the connection string is read by
:mod:`tapelog.store._pg_conninfo`.
"""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import os
import socket
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from tapelog._errors import (
    CorruptLogError,
    SessionExistsError,
    SessionLockedError,
    SessionNotFoundError,
    StoreError,
)
from tapelog.log._api import Session
from tapelog.store._base import LoadedSession, SessionStore, SessionSummary, SessionWriter
from tapelog.store._format import header_line
from tapelog.store._ids import validate_session_id
from tapelog.store._jsonl_read import read_session_bytes
from tapelog.store._pg_checkpoints import read_audit_checkpoint, write_audit_checkpoint
from tapelog.store._pg_conninfo import parse_conninfo
from tapelog.store._pg_follow import PostgresFollower, channel, held_keys
from tapelog.store._pg_points import PostgresPointLog, ensure_points_table
from tapelog.store._pg_pool import IdleConnections
from tapelog.store._pg_secrets import hide_secrets
from tapelog.store._pg_sql import (
    APPEND,
    CHECK,
    DDL,
    HOLDER,
    INSERT_SESSION,
    LAST_SEQ,
    LIST,
    SCHEMA_NAME,
    first_line,
    joined_lines,
    locked_message,
    session_row,
    summarise_row,
)
from tapelog.store._pg_summaries import pg_summaries
from tapelog.store._pg_writer import PostgresWriter
from tapelog.store._reserve import Reservation
from tapelog.store._summaries import F, Folded

if TYPE_CHECKING:
    from psycopg import Connection
    from psycopg.sql import Composed

__all__ = ["PostgresStore", "PostgresWriter"]


class PostgresStore(SessionStore):
    """Sessions as rows in a PostgreSQL database (see the module docstring).

    ``conninfo`` is a libpq connection string (``"host=db dbname=tapelog"`` or
    ``"postgresql://user@db/tapelog"``; a password is better kept in
    ``PGPASSWORD`` or ``~/.pgpass`` than in the string). ``schema`` names the
    PostgreSQL schema holding the two tables, so one database can hold several
    independent stores. Each call opens its own short connection; each writer
    keeps one for its lifetime.
    """

    def __init__(self, conninfo: str, *, schema: str = "tapelog") -> None:
        try:
            from psycopg.conninfo import conninfo_to_dict  # noqa: F401  (is psycopg there?)
        except ImportError as exc:
            raise StoreError(
                "the PostgreSQL store needs psycopg 3; install it with "
                "`pip install 'tapelog[postgres]'`"
            ) from exc
        if SCHEMA_NAME.fullmatch(schema) is None:
            raise StoreError(
                f"invalid PostgreSQL schema name {schema!r}: use 1 to 63 characters from "
                "A-Z, a-z, 0-9 and '_', not starting with a digit"
            )
        # Every secret the string holds, as written and decoded, is registered
        # (tapelog.log.register_secret), so no error, log or output shows it.
        self._secrets, self._shown = parse_conninfo(conninfo)
        self.conninfo = conninfo
        self.schema = schema
        server = repr(self._shown) if self._shown else "the default server"
        self._where = f"at {server} (PostgreSQL schema {schema})"
        self._schema_ready = False
        self._points = PostgresPointLog(self)
        self._idle = IdleConnections()

    def __repr__(self) -> str:
        return f"PostgresStore({self._shown!r}, schema={self.schema!r})"

    # --- connections and errors ----------------------------------------------

    def _connect(self, *, writer: bool = False) -> Connection[Any]:
        import psycopg

        options: dict[str, Any] = {}
        if writer and (kept := self._idle.take()) is not None:
            return kept
        if writer:  # lets a refused writer learn which process holds the lock
            options["application_name"] = f"tapelog pid {os.getpid()} on {socket.gethostname()}"
        with self._errors("connect to", advice="check the connection string and the server"):
            return psycopg.connect(self.conninfo, autocommit=True, **options)

    @contextlib.contextmanager
    def _errors(
        self,
        action: str,
        *,
        advice: str,
        failed: Callable[[str], StoreError] | None = None,
    ) -> Iterator[None]:
        """Turn database errors into whole-sentence :class:`StoreError`s (``failed``
        builds one from "could not ...: reason" instead, for a writer's write)."""
        import psycopg

        try:
            yield
        except psycopg.errors.UniqueViolation as exc:
            raise SessionLockedError(
                f"could not {action} the store {self._where}: a row with the same key is already "
                "stored, so another writer appended to the session (this writer's lock was "
                "lost, e.g. its connection dropped); open the session again to continue from "
                "what is stored"
            ) from exc
        except psycopg.Error as exc:
            # (a secret of one to three characters would garble the server's words)
            reason = hide_secrets(first_line(exc), self._secrets, shortest=4)
            head = f"could not {action} the store {self._where}: {reason}"
            raise (StoreError(f"{head}; {advice}") if failed is None else failed(head)) from exc

    def _hang_up(self, conn: Connection[Any]) -> None:
        """Release this connection's write locks now (not when the server notices), close."""
        import psycopg

        try:
            # Closing the connection releases the locks too, but only once the
            # server notices; a failed unlock is left to that.
            with contextlib.suppress(psycopg.Error):
                if not conn.broken:
                    conn.execute("SELECT pg_advisory_unlock_all()")
                    self._idle.give(conn)  # unlocked: the next writer may use it
        finally:
            if not conn.closed and conn not in self._idle:
                conn.close()

    def _sql(self, template: str) -> Composed:
        from psycopg import sql

        return sql.SQL(template).format(s=sql.Identifier(self.schema))

    # --- locking -------------------------------------------------------------

    def _lock_key(self, session_id: str) -> int:
        digest = hashlib.blake2b(f"{self.schema}\0{session_id}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big", signed=True)

    def _lock(self, conn: Connection[Any], session_id: str) -> None:
        key = self._lock_key(session_id)
        row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
        if row is not None and row[0] is True:
            return
        unsigned = key & 0xFFFF_FFFF_FFFF_FFFF
        holder = conn.execute(HOLDER, (unsigned >> 32, unsigned & 0xFFFF_FFFF)).fetchone()
        raise SessionLockedError(locked_message(session_id, holder))

    # --- writing -------------------------------------------------------------

    def create_schema(self) -> None:
        """Create the schema and tables now if they are missing (idempotent).

        ``create`` does this on first use; call it from a deploy step run by a
        role that may create tables, so the role the agents use needs only
        ``SELECT`` and ``INSERT`` on them.
        """
        self._schema_ready = False
        with self._connect() as conn:
            ensure_points_table(self, conn)

    def _ensure_schema(self, conn: Connection[Any]) -> None:
        if self._schema_ready:
            return
        advice = "check the role may create a schema, or run create_schema() as one that may"
        with self._errors("create the tables of", advice=advice):
            # Checked first: CREATE SCHEMA IF NOT EXISTS needs the CREATE privilege
            # even when the schema exists, which the agents' role need not have.
            names = (f'"{self.schema}".sessions', f'"{self.schema}".events')
            query = "SELECT to_regclass(%s) IS NOT NULL AND to_regclass(%s) IS NOT NULL"
            row = conn.execute(query, names).fetchone()
            if row is None or row[0] is not True:
                with conn.transaction():
                    # Serialise concurrent first uses: CREATE ... IF NOT EXISTS can race.
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock_key(""),))
                    conn.execute(self._sql(DDL))
        self._schema_ready = True

    def _insert_events(
        self, conn: Connection[Any], session_id: str, first_seq: int, lines: builtins.list[bytes]
    ) -> None:
        """Committed means durable, failed means nothing.

        The rows go in as one ``bytea[]`` parameter: one multi-row insert, one
        transaction on the autocommit connection, one round trip. The
        followers' ``NOTIFY`` follows in a second, row-less transaction (a
        second, short round trip): PostgreSQL serialises the commits of every
        transaction that notifies under one database-wide lock held through the
        commit's WAL flush, so a notifying insert makes concurrent writers wait
        for each other's fsync one by one instead of sharing one (docs/scale.md
        has the A/B figures). It is sent only once the rows are committed (a
        follower woken by it finds them); a failed insert sends none.
        """
        conn.execute(self._sql(APPEND), (session_id, first_seq, lines))
        conn.execute("SELECT pg_notify(%s, %s)", (channel(self.schema), session_id))

    @contextlib.contextmanager
    def _writer_connection(
        self, action: str, *, advice: str, conn: Connection[Any] | None = None
    ) -> Iterator[Connection[Any]]:
        """A connection for a new writer (``conn``: one a reservation holds), hung up
        (and unlocked) if taking the session fails."""
        if conn is None:
            conn = self._connect(writer=True)
        try:
            with self._errors(action, advice=advice):
                yield conn
        except BaseException:
            self._hang_up(conn)
            raise

    def reserve(self, session_id: str) -> Reservation | None:
        validate_session_id(session_id)
        with self._writer_connection(
            f"reserve session {session_id} in", advice="nothing was stored"
        ) as conn:
            self._lock(conn, session_id)
            stored = self._exists(conn, session_id)
        if stored:
            self._hang_up(conn)
            return None
        return Reservation(session_id, self, conn, lambda: self._hang_up(conn))

    def create(self, session: Session, *, reservation: Reservation | None = None) -> PostgresWriter:
        import psycopg

        info = session.info
        validate_session_id(info.id)
        held = reservation.take(self, info.id) if reservation is not None else None
        with self._writer_connection(
            f"store session {info.id} in", advice="nothing was stored", conn=held
        ) as conn:
            if held is None:
                # the lock first: a second process creating the same id at once is
                # told who holds it, not that the session appeared meanwhile
                self._lock(conn, info.id)
            self._ensure_schema(conn)
            if self._exists(conn, info.id):
                raise self._exists_error(info.id)
            lines = [event.encode() for event in session.events]
            try:
                with conn.transaction():
                    conn.execute(self._sql(INSERT_SESSION), session_row(info))
                    if lines:
                        self._insert_events(conn, info.id, 0, lines)
            except psycopg.errors.UniqueViolation as exc:  # created meanwhile
                raise SessionExistsError(
                    f"session {info.id} was stored in the store {self._where} by another "
                    "writer while this one was creating it (two processes created the same "
                    "id at once); open it to append, or choose another id"
                ) from exc
        stored = b"".join(line + b"\n" for line in [header_line(info), *lines])
        return PostgresWriter(session, store=self, conn=conn, stored=stored)

    def open(
        self, session_id: str, *, accept_undigested: bool = False
    ) -> tuple[Session, PostgresWriter]:
        validate_session_id(session_id)
        with self._writer_connection(
            f"open session {session_id} in", advice="check the server"
        ) as conn:
            if not self._exists(conn, session_id):
                raise self._not_found(session_id)
            self._lock(conn, session_id)
            loaded, stored = self._read(conn, session_id)
            warnings, cover = loaded.resume_plan(accept_undigested=accept_undigested)
        writer = PostgresWriter(
            loaded.session, store=self, conn=conn, warnings=warnings, stored=stored
        )
        if cover:  # rows the caller accepted after the last digest: cover them now
            try:
                writer.checkpoint()
            except BaseException:
                writer.close()
                raise
        return loaded.session, writer

    def reattach(self, closed: SessionWriter) -> PostgresWriter | None:
        if not isinstance(closed, PostgresWriter) or not closed.reattachable:
            return None
        session_id = closed.session_id
        with self._writer_connection(
            f"open session {session_id} in", advice="check the server"
        ) as conn:
            self._lock(conn, session_id)
            row = conn.execute(self._sql(LAST_SEQ), (session_id,)).fetchone()
        if row is None or (-1 if row[0] is None else row[0]) != closed.next_seq - 1:
            self._hang_up(conn)  # another writer was here
            return None
        writer = PostgresWriter(closed.session, store=self, conn=conn)
        writer._carry(closed)
        return writer

    def _exists_error(self, session_id: str) -> SessionExistsError:
        return SessionExistsError(
            f"session {session_id} already exists in the store {self._where}; "
            "open it to append, or choose another id"
        )

    def _not_found(self, session_id: str) -> SessionNotFoundError:
        return SessionNotFoundError(
            f"no session {session_id} in the store {self._where}; "
            "`tapelog sessions` (or `store.list()`) lists the stored sessions"
        )

    # --- reading -------------------------------------------------------------

    @contextlib.contextmanager
    def _reading(self, action: str) -> Iterator[Connection[Any] | None]:
        """A connection for a read, or ``None`` when no session was ever stored."""
        import psycopg

        with self._connect() as conn, self._errors(action, advice="check the server"):
            try:
                conn.execute(self._sql("SELECT 1 FROM {s}.sessions LIMIT 0"))
                created = True
            except psycopg.errors.UndefinedTable:
                created = False  # nothing is created until the first session is
            yield conn if created else None

    def _exists(self, conn: Connection[Any], session_id: str) -> bool:
        import psycopg

        query = self._sql("SELECT 1 FROM {s}.sessions WHERE id = %s")
        try:
            return conn.execute(query, (session_id,)).fetchone() is not None
        except psycopg.errors.UndefinedTable:
            return False

    def exists(self, session_id: str) -> bool:
        validate_session_id(session_id)
        with self._reading(f"look up session {session_id} in") as conn:
            return conn is not None and self._exists(conn, session_id)

    def load(self, session_id: str) -> LoadedSession:
        validate_session_id(session_id)
        with self._reading(f"read session {session_id} from") as conn:
            if conn is None:
                raise self._not_found(session_id)
            return self._read(conn, session_id)[0]

    def session_bytes(self, session_id: str) -> bytes:
        validate_session_id(session_id)
        with self._reading(f"read session {session_id} from") as conn:
            if conn is None:
                raise self._not_found(session_id)
            return self._rows_as_jsonl(conn, session_id)

    def _read(self, conn: Connection[Any], session_id: str) -> tuple[LoadedSession, bytes]:
        """Scan and replay the bytes of :meth:`_rows_as_jsonl`, as a JSONL file's;
        the session and those bytes."""
        data = self._rows_as_jsonl(conn, session_id)
        return self.load_bytes(session_id, data), data

    def load_bytes(self, session_id: str, data: bytes) -> LoadedSession:
        """:meth:`load` of ``data``, what :meth:`session_bytes` gave (so what is
        derived from the session is derived from exactly those bytes)."""
        source = f"session {session_id} in the store {self._where}"
        loaded, _ = read_session_bytes(data, source=source)
        if loaded.session.id != session_id:
            raise CorruptLogError(
                f"{source}: line 1: the header names session {loaded.session.id!r}; "
                "a session's header must name its own id",
                line=1,
            )
        return loaded

    def audit_checkpoint(self, session_id: str) -> bytes | None:
        """The cache audit's checkpoint kept for the session (derived: ``_pg_checkpoints``)."""
        validate_session_id(session_id)
        return read_audit_checkpoint(self, session_id)

    def keep_audit_checkpoint(
        self, session_id: str, body: bytes, *, events: int, size: int, sha256: str
    ) -> None:
        """Keep ``body`` as the session's cache audit checkpoint (a failure is no error)."""
        validate_session_id(session_id)
        write_audit_checkpoint(self, session_id, body, events=events, size=size, sha256=sha256)

    def _rows_as_jsonl(self, conn: Connection[Any], session_id: str) -> bytes:
        """The header and every event, fetched in one snapshot, joined as a JSONL file.

        Rows a file could not hold line for line (a gap in ``seq``, a newline
        inside a line) are refused here, naming the line they would be on.
        """
        source = f"session {session_id} in the store {self._where}"
        # The header row and the seed events were committed together and events
        # are only ever appended, so two statements see one consistent prefix.
        with self._errors(f"read session {session_id} from", advice="check the server"):
            header = conn.execute(
                self._sql("SELECT header FROM {s}.sessions WHERE id = %s"),
                (session_id,),
                binary=True,
            ).fetchone()
            if header is None:
                raise self._not_found(session_id)
            rows = conn.execute(
                self._sql("SELECT seq, line FROM {s}.events WHERE session_id = %s ORDER BY seq"),
                (session_id,),
                binary=True,
            ).fetchall()
        return joined_lines(source, bytes(header[0]), rows)

    def follow(self, session_id: str, since: int) -> PostgresFollower:
        validate_session_id(session_id)
        return PostgresFollower(self, session_id, since)

    def summaries(
        self, previous: Mapping[str, Folded[F]], new_fold: Callable[[], F]
    ) -> dict[str, Folded[F]]:
        return pg_summaries(self, previous, new_fold)

    def active(self, session_id: str) -> bool:
        validate_session_id(session_id)
        with self._connect() as conn, self._errors("read the write locks of", advice=CHECK):
            return self._lock_key(session_id) in held_keys(conn)

    def active_sessions(self) -> set[str]:
        with self._reading("read the write locks of") as conn:
            if conn is None:
                return set()
            held = held_keys(conn)
            if not held:
                return set()
            ids = [r[0] for r in conn.execute(self._sql("SELECT id FROM {s}.sessions"))]
        return {i for i in ids if self._lock_key(i) in held}

    def point_log(self) -> PostgresPointLog:
        return self._points

    def list(self) -> builtins.list[SessionSummary]:
        with self._reading("list the sessions in") as conn:
            if conn is None:
                return []
            rows = conn.execute(self._sql(LIST), binary=True).fetchall()
        summaries = [summarise_row(*row) for row in rows]
        summaries.sort(key=lambda s: (s.created or 0, s.id), reverse=True)
        return summaries
