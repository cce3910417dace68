"""Proxy replicas that act as one (issue 19): the conversation index and the
per-session lock live in the store, so any replica continues any conversation.

Real ``tapelog proxy`` processes on one store (PostgreSQL from the
``pg_conninfo`` fixture, or one JSONL directory); conversations alternate
between replicas turn by turn, through the official ``openai`` SDK.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from openai import OpenAI

from store.test_cli_postgres import url_of
from store.test_postgres import drop_schema, pg_conninfo, schema_for
from tapelog.emulator import Emulator
from tapelog.store import JsonlStore, PostgresStore, SessionStore

from ._helpers import SECRET, assert_rebuilds, serve
from ._replicas import Replica, replicas, stored_sessions

__all__ = ["pg_conninfo"]  # the imported fixture


@pytest.fixture
def pg_store(pg_conninfo: str, tmp_path: Path) -> Iterator[tuple[str, PostgresStore]]:
    """A store URL of a schema of its own, and the same store."""
    schema = schema_for(tmp_path)
    yield url_of(pg_conninfo, schema), PostgresStore(pg_conninfo, schema=schema)
    drop_schema(pg_conninfo, schema)


def alternate(reps: list[Replica], conversations: int, turns: int) -> None:
    """Each conversation's turn ``t`` goes to replica ``t % len(reps)``; every
    other turn streams. The answers go back into the history as the SDK gave them."""
    histories: list[list[dict[str, str]]] = [[] for _ in range(conversations)]
    clients = [OpenAI(base_url=r.url, api_key=SECRET, max_retries=0) for r in reps]
    try:
        for turn in range(turns):
            client = clients[turn % len(clients)]
            for c, history in enumerate(histories):
                history.append({"role": "user", "content": f"conversation {c}, turn {turn}"})
                if turn % 2:
                    stream = client.chat.completions.create(
                        model="deepseek-chat", messages=history, stream=True
                    )
                    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
                else:
                    answer = client.chat.completions.create(model="deepseek-chat", messages=history)
                    text = answer.choices[0].message.content or ""
                history.append({"role": "assistant", "content": text})
    finally:
        for client in clients:
            client.close()


def assert_one_session_each(store: SessionStore, upstream: Emulator, conversations: int) -> None:
    sessions = stored_sessions(store)
    assert len(sessions) == conversations, sorted(sessions)
    assert all(s.info.parent is None for s in sessions.values())
    assert_rebuilds(sessions, upstream)


def test_two_postgres_replicas_alternating_give_one_session_per_conversation(
    pg_store: tuple[str, PostgresStore],
) -> None:
    url, store = pg_store
    upstream = Emulator()
    with serve(upstream.app) as port, replicas(url, port, 2) as reps:
        alternate(reps, conversations=4, turns=6)
    assert_one_session_each(store, upstream, 4)


def test_two_jsonl_replicas_alternating_give_one_session_per_conversation(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    upstream = Emulator()
    with serve(upstream.app) as port, replicas(str(root), port, 2) as reps:
        alternate(reps, conversations=3, turns=4)
    assert_one_session_each(JsonlStore(root), upstream, 3)
