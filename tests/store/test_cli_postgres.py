"""Every CLI command on a PostgreSQL store: ``--store postgresql://...`` or ``$TAPELOG_STORE``.

Same server as test_postgres.py (its ``pg_conninfo`` fixture: ``TAPELOG_TEST_PG``
or a throwaway server), one PostgreSQL schema per test, picked with the URL's
``?schema=`` parameter. The provider is the emulator over real HTTP, so the
bodies it received can be compared with ``tapelog requests --out``.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner, Result
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from tapelog.cli import cli
from tapelog.emulator import Emulator
from tapelog.log import decode
from tapelog.store import PostgresStore
from tapelog.store._api import verify_jsonl

from .test_postgres import drop_schema, pg_conninfo, schema_for

__all__ = ["pg_conninfo"]  # the imported fixture, shared with test_postgres.py

SECRET = "hunter2-never-shown"


def url_of(conninfo: str, schema: str, *, password: str | None = None) -> str:
    """The fixture's server as a postgresql:// URL (every parameter in the query)."""
    params = conninfo_to_dict(conninfo)
    if password is not None:
        params["password"] = password
    query = "&".join(f"{k}={urllib.parse.quote(str(v), safe='')}" for k, v in params.items())
    return f"postgresql://?{query}&schema={schema}"


def tapelog(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), obj={"debug": False}, env=env)


@pytest.fixture
def pg(pg_conninfo: str, tmp_path: Path) -> Iterator[tuple[str, PostgresStore]]:
    """A store URL (schema of its own, a password the server ignores) and the same store."""
    schema = schema_for(tmp_path)
    yield (
        url_of(pg_conninfo, schema, password=SECRET),
        PostgresStore(pg_conninfo, schema=schema),
    )
    drop_schema(pg_conninfo, schema)


def test_run_resume_and_audit_a_session_stored_in_postgres(
    pg: tuple[str, PostgresStore], tmp_path: Path, loopback_emulator: tuple[Emulator, int]
) -> None:
    url, store = pg
    emulator, port = loopback_emulator
    emulator.push(
        {"tool_calls": [{"name": "list_dir", "arguments": '{"path": "."}'}]},
        {"text": "There is one file, a.txt."},
        {"text": "It says hello."},
    )
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "a.txt").write_text("hello\n")
    common = [
        "--session", "pg-1", "--provider", "deepseek", "--model", "deepseek-chat",
        "--base-url", f"http://127.0.0.1:{port}/deepseek", "--workspace", str(workspace),
    ]  # fmt: skip
    env = {"DEEPSEEK_API_KEY": "sk-test"}
    first = tapelog("run", "What is in the workspace?", *common, "--store", url, env=env)
    assert first.exit_code == 0, first.output
    assert "There is one file" in first.stdout
    # The second process resumes through $TAPELOG_STORE instead of --store.
    second = tapelog("run", "Read it.", *common, env={**env, "TAPELOG_STORE": url})
    assert second.exit_code == 0, second.output
    assert "It says hello." in second.stdout
    stored = store.session_bytes("pg-1")
    assert b'"reason":"resume"' in stored
    assert len(store.load("pg-1").session) == len(stored.splitlines()) - 1

    out = tmp_path / "bodies"
    rebuilt = tapelog("requests", "pg-1", "--out", str(out), "--store", url)
    assert rebuilt.exit_code == 0, rebuilt.output
    assert [f.read_bytes() for f in sorted(out.iterdir())] == [r.body for r in emulator.received]
    assert len(emulator.received) == 3

    verified = tapelog("verify", "pg-1", "--store", url)
    assert verified.exit_code == 0, verified.output
    assert verified.stdout.startswith("ok: pg-1: ")
    assert str(verify_jsonl(stored, expected_id="pg-1").stats) in verified.stdout

    listed = tapelog("sessions", "--json", "--store", url)
    assert listed.exit_code == 0, listed.output
    (summary,) = decode(listed.stdout.encode())
    assert summary["id"] == "pg-1"
    assert summary["events"] == len(store.load("pg-1").session)
    assert summary["size"] == len(stored)

    end_of_first_turn = next(
        e.seq for e in store.load("pg-1").session.events if e.type == "turn/end"
    )
    forked = tapelog(
        "fork", "pg-1", "--at", str(end_of_first_turn), "--id", "pg-fork", "--store", url
    )
    assert forked.exit_code == 0, forked.output
    assert forked.stdout == "pg-fork\n"
    child = store.load("pg-fork").session
    assert child.info.parent == "pg-1"
    assert child.info.seed_length == end_of_first_turn + 1

    cache = tapelog("cache", "pg-1", "--json", "--store", url)
    assert cache.exit_code == 0, cache.output
    report = decode(cache.stdout.encode())
    assert [row["index"] for row in report["requests"]] == [1, 2, 3]

    shown = tapelog("show", "pg-1", "--store", url)
    assert shown.exit_code == 0, shown.output
    assert "session pg-1" in shown.stdout
    diff = tapelog("diff", "pg-1", "1", "2", "--store", url)
    assert diff.exit_code == 0, diff.output
    page = tmp_path / "report.html"
    html = tapelog("report", "pg-1", "-o", str(page), "--store", url)
    assert html.exit_code == 0, html.output
    assert html.stdout.startswith(f"wrote {page} (3 request(s), ")

    everything = "".join(
        r.output for r in (first, second, rebuilt, verified, listed, forked, cache, shown, diff)
    )
    assert SECRET not in everything


def test_demo_runs_on_postgres(pg: tuple[str, PostgresStore]) -> None:
    url, store = pg
    result = tapelog("demo", "--store", url)
    assert result.exit_code == 0, result.output
    (summary,) = store.list()
    assert summary.id in result.output
    assert "requests rebuilt byte-exact from the log" in result.output


def test_sessions_names_the_database_without_its_password(
    pg: tuple[str, PostgresStore],
) -> None:
    url, store = pg
    result = tapelog("sessions", "--store", url)
    assert result.exit_code == 0, result.output
    assert result.output == f"no sessions in {store!r}\n"
    assert f"schema='{store.schema}'" in result.output
    assert SECRET not in result.output


def test_verify_reports_rows_missing_from_the_database(pg: tuple[str, PostgresStore]) -> None:
    url, store = pg
    created = tapelog("run", "hi", "--session", "holes", "--tools", "none", "--store", url)
    assert created.exit_code == 0, created.output
    with psycopg.connect(store.conninfo, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DELETE FROM {}.events WHERE seq = 1").format(sql.Identifier(store.schema))
        )
    result = tapelog("verify", "holes", "--store", url)
    assert result.exit_code == 1, result.output
    assert "line 3: the events table has seq 2 where seq 1 belongs (rows are missing)" in (
        result.stdout
    )
    assert result.stdout.endswith("holes: invalid (1 problem)\n")


def test_a_path_still_means_a_session_file_whatever_the_store(
    pg: tuple[str, PostgresStore], tmp_path: Path
) -> None:
    url, store = pg
    created = tapelog("run", "hi", "--session", "copied", "--tools", "none", "--store", url)
    assert created.exit_code == 0, created.output
    copy = tmp_path / "copied.jsonl"
    copy.write_bytes(store.session_bytes("copied"))
    # The store is never opened for a file, so even an unusable one does not matter.
    nowhere = f"postgresql://u:{SECRET}@/d?host={tmp_path}&port=5"
    for command in ("verify", "show", "requests"):
        result = tapelog(command, str(copy), "--store", nowhere)
        assert result.exit_code == 0, result.output
    assert tapelog("verify", str(copy)).stdout.startswith(f"ok: {copy}: ")


@pytest.mark.parametrize(
    ("store", "message"),
    [
        (
            f"postgresql://u:{SECRET}@/d?host=/nonexistent-dir&port=5",
            "error: could not connect to the store at "
            "'user=u dbname=d host=/nonexistent-dir port=5' (PostgreSQL schema tapelog): ",
        ),
        (
            f"postgres://u:{SECRET}@[::1/d",
            "error: invalid PostgreSQL connection string: end of string reached when looking "
            'for matching "]" in IPv6 host address in URI: "postgres://u:***@[::1/d"; use ',
        ),
        (
            f"postgresql://u:{SECRET}@h/d?schema=no-dash",
            "error: invalid PostgreSQL schema name 'no-dash': use 1 to 63 characters",
        ),
        (
            f"postgresql://u:{SECRET}@h/d?schema=a&schema=b",
            "error: the store URL gives schema= 2 times; give the PostgreSQL schema once",
        ),
        (
            f"mysql://u:{SECRET}@h/d",
            "error: the store mysql://... is not supported; "
            "give a directory or a postgresql://USER@HOST/DBNAME URL",
        ),
    ],
)
def test_a_bad_store_url_is_one_line_without_the_password(store: str, message: str) -> None:
    for args, env in ((["--store", store], None), ([], {"TAPELOG_STORE": store})):
        result = tapelog("sessions", *args, env=env)
        assert result.exit_code == 2, result.output
        assert result.stdout == ""
        assert result.stderr.startswith(message)
        assert result.stderr.count("\n") == 1
        assert SECRET not in result.stderr


def test_a_file_is_not_a_store(tmp_path: Path) -> None:
    file = tmp_path / "f"
    file.write_text("")
    result = tapelog("sessions", "--store", str(file))
    assert result.exit_code == 2
    assert result.stderr == (
        f"error: the store {file} is a file; give a directory or a postgresql:// URL\n"
    )


def test_help_names_both_kinds_of_store() -> None:
    text = " ".join(tapelog("run", "--help").output.split())
    assert "--store DIR|URL" in text
    assert "a directory of JSONL files, or a PostgreSQL URL" in text
    assert "postgresql://USER@HOST/DBNAME[?schema=NAME]" in text


def test_chat_stores_its_turns_in_postgres(pg: tuple[str, PostgresStore]) -> None:
    url, store = pg
    result = CliRunner().invoke(
        cli,
        ["chat", "--session", "talk", "--tools", "none", "--store", url],
        obj={"debug": False},
        input="hello\nagain\n",
    )
    assert result.exit_code == 0, result.output
    events = store.load("talk").session.events
    assert [e.data["reason"]["kind"] for e in events if e.type == "turn/end"] == [
        "completed",
        "completed",
    ]


@pytest.mark.parametrize(
    "userinfo",
    [
        "alice:s3cr/etpw",  # libpq ends the authority at the '/': 's3cr' became a port
        "alice:s3cr@etpw",  # libpq ends the user part at the first '@': 'etpw@...' a host
        "alice:Zq9/Xk2@Wv7",
    ],
)
def test_an_unencoded_slash_or_at_in_the_password_shows_no_part_of_it(userinfo: str) -> None:
    password = userinfo.partition(":")[2]
    pieces = {p for p in re.split(r"[/@]", password) if p} | {password}
    url = f"postgresql://{userinfo}@localhost:5/db"
    for args, env in ((["--store", url], None), ([], {"TAPELOG_STORE": url})):
        result = tapelog("sessions", *args, env=env)
        assert result.exit_code == 2, result.output
        assert result.stderr.startswith(
            "error: the PostgreSQL URL's user or password holds an unencoded '/' or '@'"
        )
        assert result.stderr.count("\n") == 1
        assert not [p for p in pieces if p in result.stderr], result.stderr
    encoded = urllib.parse.quote(password, safe="")
    assert PostgresStore(f"postgresql://alice:{encoded}@localhost:5/db")  # encoded: accepted


def test_a_libpq_keyword_string_is_a_postgres_store_not_a_directory(
    pg_conninfo: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    schema = schema_for(tmp_path)
    spec = f"{pg_conninfo} schema={schema}"  # e.g. 'host=/tmp/... dbname=postgres ...'
    assert spec.startswith(("host=", "user=", "dbname="))
    try:
        ran = tapelog(
            "run", "hello", "--session", "kw", "--tools", "none", "--provider", "emulator",
            "--store", spec,
        )  # fmt: skip
        assert ran.exit_code == 0, ran.output
        assert PostgresStore(pg_conninfo, schema=schema).exists("kw")
        assert list(work.iterdir()) == []  # no directory named after the string
        listed = tapelog("sessions", "--store", spec)
        assert "kw" in listed.stdout
    finally:
        drop_schema(pg_conninfo, schema)
    bad = tapelog("sessions", "--store", "host=/nonexistent-dir dbname=x user=y")
    assert bad.exit_code == 2
    assert bad.stderr.startswith("error: could not connect to the store at ")
    assert bad.stderr.count("\n") == 1
    assert list(work.iterdir()) == []
