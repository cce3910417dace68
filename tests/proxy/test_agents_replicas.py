"""Another agent's request on another replica (PostgreSQL): it branches off the
main session there, and the main agent's next request, back on the first
replica, continues the main session unbroken."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from store.test_cli_postgres import url_of
from store.test_postgres import drop_schema, pg_conninfo, schema_for
from tapelog.emulator import Emulator
from tapelog.log import encode
from tapelog.store import PostgresStore

from ._helpers import SECRET, assert_rebuilds, serve
from ._replicas import replicas, stored_sessions
from .test_agents import MAIN_SYSTEM, MAIN_TOOLS, SUB_SYSTEM, SUB_TOOLS, _body

__all__ = ["pg_conninfo"]  # the imported fixture


@pytest.fixture
def pg_store(pg_conninfo: str, tmp_path: Path) -> Iterator[tuple[str, PostgresStore]]:
    schema = schema_for(tmp_path)
    yield url_of(pg_conninfo, schema), PostgresStore(pg_conninfo, schema=schema)
    drop_schema(pg_conninfo, schema)


def _send(url: str, body: object) -> str:
    head = {"authorization": f"Bearer {SECRET}", "content-type": "application/json"}
    response = httpx.post(url + "/chat/completions", content=encode(body), headers=head)
    assert response.status_code == 200, response.text
    text: str = response.json()["choices"][0]["message"]["content"]
    return text


def test_a_subagent_on_another_replica_branches_and_the_main_session_goes_on(
    pg_store: tuple[str, PostgresStore], tmp_path: Path
) -> None:
    url, store = pg_store
    upstream = Emulator()
    with serve(upstream.app) as port, replicas(url, port, 2, tmp_path) as (a, b):
        first = [{"role": "user", "content": "Say hello"}]
        hello = _send(a.url, _body(MAIN_SYSTEM, MAIN_TOOLS, first))
        exchange = [*first, {"role": "assistant", "content": hello}]
        _send(b.url, _body(SUB_SYSTEM, SUB_TOOLS, [*exchange, {"role": "user", "content": "x"}]))
        _send(a.url, _body(MAIN_SYSTEM, MAIN_TOOLS, [*exchange, {"role": "user", "content": "y"}]))
    sessions = stored_sessions(store)
    assert len(sessions) == 2
    (sub,) = [s for s in sessions.values() if s.info.parent is not None]
    main = sessions[sub.info.parent or ""]
    assert sub.events[0].type == "session/origin"
    assert sub.events[0].data["parent"] == main.id
    assert len([e for e in main.events if e.type == "turn/start"]) == 2
    assert [e.type for e in main.events if e.type.startswith("request/")] == ["request/header"]
    assert_rebuilds(sessions, upstream)
