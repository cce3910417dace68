"""PostgresStore: the conformance suite plus what is specific to a database.

These tests need a real PostgreSQL server. ``TAPELOG_TEST_PG`` names one (a
libpq conninfo string, as .ci/run exports); without it the tests start a
throwaway server from the installed binaries (Debian: ``apt-get install
postgresql``) on a Unix socket under /tmp and stop it afterwards. With neither
they fail, saying so: a silently skipped backend is an untested backend.
"""

from __future__ import annotations

import glob
import hashlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from tapelog import CorruptLogError, Session, SessionLockedError, StoreError
from tapelog.log import decode, encode
from tapelog.store import PostgresStore, SessionStore
from tapelog.store._api import PointRecord
from tapelog.store._format import header_line

from .conformance import StoreConformance, full_session, lines_of, one_turn

_HOW = (
    "set TAPELOG_TEST_PG to a libpq connection string of a server the tests may create "
    "schemas in (e.g. 'host=127.0.0.1 port=54329 user=postgres dbname=postgres'), or install "
    "the PostgreSQL server binaries (Debian: apt-get install postgresql) so the tests start a "
    "throwaway server themselves; .ci/run does both"
)


def _bindir() -> Path | None:
    """The newest installed server binaries (Debian keeps them per major version)."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0,
    )
    initdb = found[-1] if found else shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _as_server_user() -> dict[str, Any]:
    """initdb and postgres refuse to run as root: run them as ``postgres`` then."""
    if os.geteuid() != 0:
        return {}
    try:
        user = pwd.getpwnam("postgres")
    except KeyError:
        pytest.fail(f"running as root, but there is no 'postgres' user to run the server; {_HOW}")
    return {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}


_PREFIX = "tapelog-pg-"


def _stop_if_orphaned(bindir: Path, base: Path, run_as: dict[str, Any]) -> None:
    """Stop and remove a throwaway server whose test run was killed before its teardown."""
    try:
        owner = int((base / "owner.pid").read_text())
        os.kill(owner, 0)
        return  # its test run is still going
    except ProcessLookupError:
        pass
    except (OSError, ValueError):
        return  # not ours to judge
    pg_ctl = [str(bindir / "pg_ctl"), "-D", str(base / "data"), "-m", "immediate", "stop"]
    subprocess.run(pg_ctl, cwd="/tmp", capture_output=True, timeout=60, check=False, **run_as)
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_conninfo() -> Iterator[str]:
    """A conninfo string of a live server: ``$TAPELOG_TEST_PG`` or a throwaway one."""
    given = os.environ.get("TAPELOG_TEST_PG")
    if given:
        try:
            psycopg.connect(given, connect_timeout=10).close()
        except psycopg.Error as exc:
            pytest.fail(f"cannot connect to TAPELOG_TEST_PG={given!r}: {exc}; {_HOW}")
        yield given
        return
    bindir = _bindir()
    if bindir is None:
        pytest.fail(
            f"the PostgreSQL store tests need a server and TAPELOG_TEST_PG is unset; {_HOW}"
        )
    run_as = _as_server_user()
    for old in glob.glob(f"/tmp/{_PREFIX}*"):
        _stop_if_orphaned(bindir, Path(old), run_as)
    base = Path(tempfile.mkdtemp(prefix=_PREFIX, dir="/tmp"))  # short: a socket lives here
    (base / "owner.pid").write_text(f"{os.getpid()}\n")
    if run_as:
        os.chown(base, run_as["user"], run_as["group"])

    def pg(*args: str) -> None:
        done = subprocess.run(
            [str(bindir / args[0]), *args[1:]],
            cwd=base,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            **run_as,
        )
        if done.returncode != 0:
            log = base / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            pytest.fail(f"{args[0]} failed: {done.stderr.strip()} {tail}; {_HOW}")

    data = str(base / "data")
    try:
        pg("initdb", "-D", data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C")
        # A throwaway server: no TCP port to collide on, no fsync to wait for.
        options = f"-k {base} -c listen_addresses='' -c fsync=off -c full_page_writes=off"
        pg("pg_ctl", "-D", data, "-l", str(base / "server.log"), "-o", options, "-w", "start")
        try:
            yield f"host={base} user=postgres dbname=postgres"
        finally:
            pg("pg_ctl", "-D", data, "-m", "immediate", "-w", "stop")
    finally:
        shutil.rmtree(base, ignore_errors=True)


def schema_for(tmp_path: Path) -> str:
    """One schema per test, derived from its tmp_path so two stores share it."""
    return "t_" + hashlib.blake2b(str(tmp_path).encode(), digest_size=10).hexdigest()


def drop_schema(conninfo: str, schema: str) -> None:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def insert_raw(store: PostgresStore, session_id: str, lines: list[bytes]) -> None:
    """Rows as a writer other than ours might have left them (header first)."""
    store.create_schema()
    header = decode(lines[0])
    with psycopg.connect(store.conninfo, autocommit=True) as conn, conn.transaction():
        schema = sql.Identifier(store.schema)
        conn.execute(
            sql.SQL(
                "INSERT INTO {}.sessions (id, format_version, created, header) "
                "VALUES (%s, %s, %s, %s)"
            ).format(schema),
            (session_id, header.get("format_version"), header.get("created"), lines[0]),
        )
        for seq, line in enumerate(lines[1:]):
            conn.execute(
                sql.SQL("INSERT INTO {}.events (session_id, seq, line) VALUES (%s, %s, %s)").format(
                    schema
                ),
                (session_id, seq, line),
            )


def stored_rows(store: PostgresStore, session_id: str) -> tuple[bytes, list[bytes]]:
    with psycopg.connect(store.conninfo, autocommit=True) as conn:
        schema = sql.Identifier(store.schema)
        row = conn.execute(
            sql.SQL("SELECT header FROM {}.sessions WHERE id = %s").format(schema), (session_id,)
        ).fetchone()
        assert row is not None
        lines = conn.execute(
            sql.SQL("SELECT line FROM {}.events WHERE session_id = %s ORDER BY seq").format(schema),
            (session_id,),
        ).fetchall()
    return row[0], [line for (line,) in lines]


class TestPostgresStore(StoreConformance):
    @pytest.fixture(autouse=True)
    def _database(self, pg_conninfo: str, tmp_path: Path) -> Iterator[None]:
        self.conninfo = pg_conninfo
        yield
        drop_schema(pg_conninfo, schema_for(tmp_path))

    def make_store(self, tmp_path: Path) -> SessionStore:
        return PostgresStore(self.conninfo, schema=schema_for(tmp_path))

    def write_raw(self, store: SessionStore, session_id: str, lines: list[bytes]) -> None:
        assert isinstance(store, PostgresStore)
        insert_raw(store, session_id, lines)


@pytest.fixture
def store(pg_conninfo: str, tmp_path: Path) -> Iterator[PostgresStore]:
    yield PostgresStore(pg_conninfo, schema=schema_for(tmp_path))
    drop_schema(pg_conninfo, schema_for(tmp_path))


def stored(store: PostgresStore, session: Session) -> None:
    with store.create(session):
        pass


def test_rows_hold_the_exact_header_and_event_bytes(store: PostgresStore) -> None:
    session = full_session("exact")
    stored(store, session)
    header, lines = stored_rows(store, "exact")
    assert header == header_line(session.info)
    assert lines == lines_of(session)
    assert [s.size for s in store.list()] == [sum(len(x) + 1 for x in [header, *lines])]


def test_reading_creates_nothing(store: PostgresStore) -> None:
    assert store.list() == []
    assert not store.exists("nothing")
    with psycopg.connect(store.conninfo) as conn:
        found = conn.execute(
            "SELECT 1 FROM pg_namespace WHERE nspname = %s", (store.schema,)
        ).fetchone()
    assert found is None
    store.create_schema()
    store.create_schema()  # idempotent
    assert store.list() == []


def test_after_create_schema_the_agents_role_needs_only_select_and_insert(
    store: PostgresStore,
) -> None:
    role = f"{store.schema}_app"  # a role may not create tables (nor the schema)
    store.create_schema()
    with psycopg.connect(store.conninfo, autocommit=True) as conn:
        schema, app = sql.Identifier(store.schema), sql.Identifier(role)
        conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(app))
        conn.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(schema, app))
        conn.execute(
            sql.SQL("GRANT SELECT, INSERT ON {}.sessions, {}.events TO {}").format(
                schema, schema, app
            )
        )
    try:
        limited = PostgresStore(f"{store.conninfo} options='-c role={role}'", schema=store.schema)
        session = Session("least")
        with limited.create(session):
            one_turn(session)
        resumed, writer = limited.open("least")
        writer.close()
        assert lines_of(limited.load("least").session) == lines_of(session) == lines_of(resumed)
        assert [s.id for s in limited.list()] == ["least"]
        bare = PostgresStore(limited.conninfo, schema=store.schema + "_other")
        with pytest.raises(StoreError) as info:
            bare.create(Session("nowhere"))
        assert "could not create the tables of the store at " in str(info.value)
        assert "permission denied for database" in str(info.value)
        assert str(info.value).endswith(
            "; check the role may create a schema, or run create_schema() as one that may"
        )
    finally:
        drop_schema(store.conninfo, store.schema)
        with psycopg.connect(store.conninfo, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def test_a_row_another_writer_stored_refuses_the_flush_and_keeps_the_events(
    store: PostgresStore,
) -> None:
    session = Session("race")
    writer = store.create(session)
    one_turn(session)
    # What a second writer would do if this writer's lock were lost: take seq 0.
    rogue = encode({"seq": 0, "time": 1, "type": "turn/start", "data": {"turn": 7}})
    with psycopg.connect(store.conninfo, autocommit=True) as conn:
        conn.execute(
            sql.SQL("INSERT INTO {}.events VALUES (%s, 0, %s)").format(
                sql.Identifier(store.schema)
            ),
            ("race", rogue),
        )
    with pytest.raises(SessionLockedError) as info:
        writer.flush()
    # the turn's three events and the digest that closes their write
    assert "could not write 4 events of session race" in str(info.value)
    assert "another writer appended to the session" in str(info.value)
    assert "open the session again to continue from what is stored" in str(info.value)
    assert writer.pending == 4
    assert stored_rows(store, "race")[1] == [rogue]  # nothing of the failed flush
    with pytest.raises(SessionLockedError):
        writer.close()  # close flushes, fails the same way, and still releases
    assert writer.closed
    _, again = store.open("race")
    again.close()


def test_a_gap_in_the_rows_is_reported_with_its_line(store: PostgresStore) -> None:
    session = Session("holes")
    one_turn(session)
    stored(store, session)
    with psycopg.connect(store.conninfo, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DELETE FROM {}.events WHERE seq = 1").format(sql.Identifier(store.schema))
        )
    with pytest.raises(CorruptLogError) as info:
        store.load("holes")
    assert info.value.line == 3
    assert "line 3: the events table has seq 2 where seq 1 belongs (rows are missing)" in str(
        info.value
    )


def test_a_header_naming_another_session_is_refused(store: PostgresStore) -> None:
    header = encode({"format_version": 0, "id": "real", "created": 1})
    insert_raw(store, "alias", [header])
    with pytest.raises(CorruptLogError, match="line 1: the header names session 'real'"):
        store.load("alias")


def test_list_survives_a_damaged_header(store: PostgresStore) -> None:
    stored(store, Session("fine", created=2))
    insert_raw(store, "broken", [b'{"format_version":0,"id":"broken","created":1}'])
    with psycopg.connect(store.conninfo, autocommit=True) as conn:
        conn.execute(
            sql.SQL("UPDATE {}.sessions SET header = 'not json' WHERE id = 'broken'").format(
                sql.Identifier(store.schema)
            )
        )
    by_id = {s.id: s for s in store.list()}
    assert by_id["fine"].events == 0
    assert by_id["broken"].events is None
    assert by_id["broken"].error is not None
    assert "not valid JSON" in by_id["broken"].error
    assert "load the session for details" in by_id["broken"].error


def test_connection_problems_are_sentences_without_the_password(tmp_path: Path) -> None:
    nowhere = PostgresStore(f"host={tmp_path} port=5 user=u password=hunter2 dbname=d")
    assert "hunter2" not in repr(nowhere)
    with pytest.raises(StoreError) as info:
        nowhere.list()
    text = str(info.value)
    shown = f"user=u dbname=d host={tmp_path} port=5"
    assert text.startswith(
        f"could not connect to the store at '{shown}' (PostgreSQL schema tapelog)"
    )
    assert f'socket "{tmp_path}/.s.PGSQL.5" failed: No such file or directory' in text
    assert repr(nowhere) == f"PostgresStore('{shown}', schema='tapelog')"
    assert text.endswith("; check the connection string and the server")
    assert "hunter2" not in text
    with pytest.raises(StoreError) as bad:
        PostgresStore("host=a =b")
    assert str(bad.value) == (
        'invalid PostgreSQL connection string: invalid connection option ""; '
        "use 'host=HOST dbname=NAME user=USER' or 'postgresql://USER@HOST/NAME'"
    )
    with pytest.raises(StoreError, match="invalid PostgreSQL schema name 'no-dash'"):
        PostgresStore("", schema="no-dash")


def test_tapelog_imports_without_psycopg_and_says_how_to_get_it() -> None:
    script = textwrap.dedent(
        """
        import sys
        sys.modules["psycopg"] = None  # as if the extra were not installed
        from tapelog.store import PostgresStore
        try:
            PostgresStore("dbname=x")
        except Exception as exc:
            print(type(exc).__name__, exc)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == (
        "StoreError the PostgreSQL store needs psycopg 3; install it with "
        "`pip install 'tapelog[postgres]'`"
    )


# --- processes ----------------------------------------------------------------

_HOLDER = textwrap.dedent(
    """
    import sys
    from tapelog import Session
    from tapelog.store import PostgresStore
    session = Session("shared")
    writer = PostgresStore(sys.argv[1], schema=sys.argv[2]).create(session)
    session.append("turn/start", {"turn": 0})
    writer.flush()
    print("ready", flush=True)
    if sys.stdin.readline() == "close\\n":
        writer.close()
    else:
        session.append("turn/end", {"turn": 0, "reason": {"kind": "completed"}})
        import time
        time.sleep(60)  # killed here, the turn/end never flushed
    """
)


def _holder(store: PostgresStore) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _HOLDER, store.conninfo, store.schema],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def _wait_ready(child: subprocess.Popen[str]) -> None:
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "ready"


def test_a_second_process_cannot_open_a_session_being_written(store: PostgresStore) -> None:
    with _holder(store) as child:
        try:
            _wait_ready(child)
            with pytest.raises(SessionLockedError) as info:
                store.open("shared")
            host = f"tapelog pid {child.pid} on {socket.gethostname()}"[:63].split(" on ", 1)[1]
            assert str(info.value) == (
                f"session shared is open for writing by another process "
                f"(pid {child.pid} on {host}); wait for it to finish or stop it, then try again"
            )
            assert child.stdin is not None
            child.stdin.write("close\n")
            child.stdin.flush()
            assert child.wait(timeout=20) == 0
        finally:
            if child.poll() is None:
                child.kill()
    resumed, writer = store.open("shared")  # released when the holder closed
    writer.close()
    assert [e.type for e in resumed.events] == ["turn/start", "log/digest"]


def test_a_killed_writer_releases_the_lock_and_keeps_what_it_flushed(
    store: PostgresStore,
) -> None:
    with _holder(store) as child:
        try:
            _wait_ready(child)
            os.kill(child.pid, signal.SIGKILL)
            assert child.wait(timeout=10) == -signal.SIGKILL
        finally:
            if child.poll() is None:
                child.kill()
    # The server ends the holder's backend when it sees the socket close.
    deadline = time.monotonic() + 10
    while True:
        try:
            resumed, writer = store.open("shared")
            break
        except SessionLockedError:
            assert time.monotonic() < deadline, "the lock outlived its killed holder by 10 s"
            time.sleep(0.05)
    with writer:
        assert [e.type for e in resumed.events] == ["turn/start", "log/digest"]
        resumed.append("turn/end", {"turn": 0, "reason": {"kind": "interrupted"}})
    assert len(store.load("shared").session) == 4  # and the digest of each flush


def test_a_follower_queries_rows_only_when_a_flush_notifies_it(store: PostgresStore) -> None:
    """LISTEN/NOTIFY, not polling: polls between flushes send nothing to the server."""
    session = Session("notified", created=5)
    with store.create(session) as writer, store.follow(session.id, len(session)) as follower:
        assert follower.poll() == []  # the first read queries once
        sent: list[object] = []
        execute = follower._conn.execute  # type: ignore[attr-defined]

        def counted(*args: Any, **kwargs: Any) -> Any:
            sent.append(args[0])
            return execute(*args, **kwargs)

        follower._conn.execute = counted  # type: ignore[attr-defined]
        for _ in range(50):
            assert follower.poll() == []
        assert sent == []
        one_turn(session)
        writer.flush()
        assert follower.poll(timeout=5) == lines_of(session)
        assert len(sent) == 1


def test_a_points_table_from_before_response_ids_gets_their_columns(
    store: PostgresStore,
) -> None:
    """A store whose ``points`` table predates ``response_id`` and ``turn`` keeps
    its rows and records responses once a proxy uses it again."""
    store.create_schema()
    old = PointRecord("s-old", b"\x01" * 16, 1, 2)
    with psycopg.connect(store.conninfo, autocommit=True) as conn:
        table = sql.SQL("{}.points").format(sql.Identifier(store.schema))
        conn.execute(sql.SQL("DROP TABLE {}").format(table))
        conn.execute(
            sql.SQL(
                "CREATE TABLE {} (id bigserial PRIMARY KEY, session_id text NOT NULL, "
                "digest bytea NOT NULL, length integer NOT NULL, seq integer NOT NULL, "
                "anchor bytea, retry bytea, alternatives bytea[] NOT NULL DEFAULT '{{}}')"
            ).format(table)
        )
        conn.execute(
            sql.SQL(
                "INSERT INTO {} (session_id, digest, length, seq) VALUES (%s, %s, 1, 2)"
            ).format(table),
            ("s-old", old.digest),
        )
    fresh = PostgresStore(store.conninfo, schema=store.schema)
    new = PointRecord("s-new", b"\x02" * 16, 3, 9, response_id="resp_1", turn=2)
    fresh.point_log().append([new])
    assert fresh.point_log().read(0)[0] == [old, new]
    fresh.point_log().close()
