"""Proxy replicas that act as one (issue 19): the conversation index and the
per-session lock live in the store, so any replica continues any conversation.

Real ``tapelog proxy`` processes on one store (PostgreSQL from the
``pg_conninfo`` fixture, or one JSONL directory); conversations alternate
between replicas turn by turn, through the official ``openai`` SDK.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
    pg_store: tuple[str, PostgresStore], tmp_path: Path
) -> None:
    url, store = pg_store
    upstream = Emulator()
    with serve(upstream.app) as port, replicas(url, port, 2, tmp_path) as reps:
        alternate(reps, conversations=4, turns=6)
    assert_one_session_each(store, upstream, 4)


def test_two_jsonl_replicas_alternating_give_one_session_per_conversation(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    upstream = Emulator()
    with serve(upstream.app) as port, replicas(str(root), port, 2, tmp_path) as reps:
        alternate(reps, conversations=3, turns=4)
    assert_one_session_each(JsonlStore(root), upstream, 3)


class Gate:
    """The upstream with its streamed answers held after their first body piece
    while :attr:`hold` is set (the network edge of a slow answer), so a replica
    can be killed mid-stream."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.hold = False
        self.started = threading.Event()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not self.hold:
            await self.app(scope, receive, send)
            return
        pieces = 0

        async def held(message: Any) -> None:
            nonlocal pieces
            await send(message)
            if message["type"] == "http.response.body":
                pieces += 1
                if pieces == 1:
                    self.started.set()
                    while self.hold:
                        await asyncio.sleep(0.01)

        await self.app(scope, receive, held)


def test_a_replica_killed_mid_stream_loses_nothing_and_the_retry_continues_the_session(
    pg_store: tuple[str, PostgresStore], tmp_path: Path
) -> None:
    url, store = pg_store
    upstream = Emulator()
    gate = Gate(upstream.app)
    messages: list[Any] = [{"role": "user", "content": "first"}]
    with serve(gate) as port, replicas(url, port, 2, tmp_path) as (a, b):
        with OpenAI(base_url=a.url, api_key=SECRET, max_retries=0) as client:
            answer = client.chat.completions.create(model="deepseek-chat", messages=messages)
        messages += [{"role": "assistant", "content": answer.choices[0].message.content}]
        messages += [{"role": "user", "content": "second"}]
        gate.hold = True
        cut: list[BaseException] = []

        def stream_on_a() -> None:
            try:
                with OpenAI(base_url=a.url, api_key=SECRET, max_retries=0) as client:
                    for _ in client.chat.completions.create(
                        model="deepseek-chat", messages=messages, stream=True
                    ):
                        pass
            except Exception as exc:
                cut.append(exc)

        thread = threading.Thread(target=stream_on_a)
        thread.start()
        assert gate.started.wait(20), "the upstream never started answering"
        a.kill()  # mid-stream: the request was logged and flushed, the answer was not
        thread.join(20)
        assert cut, "the client saw its stream break"
        gate.hold = False
        with OpenAI(base_url=b.url, api_key=SECRET, max_retries=0) as client:  # the retry
            text = "".join(
                c.choices[0].delta.content or ""
                for c in client.chat.completions.create(
                    model="deepseek-chat", messages=messages, stream=True
                )
                if c.choices
            )
        messages += [{"role": "assistant", "content": text}, {"role": "user", "content": "3"}]
        a.start()  # restarted on its port: it knows the conversation from the store
        with OpenAI(base_url=a.url, api_key=SECRET, max_retries=0) as client:
            client.chat.completions.create(model="deepseek-chat", messages=messages)
    sessions = stored_sessions(store)
    assert len(sessions) == 1
    (session,) = sessions.values()
    ends = [e.data["reason"]["kind"] for e in session.events if e.type == "turn/end"]
    assert ends == ["completed", "interrupted", "completed", "completed"]
    steps = [e for e in session.events if e.type == "step/end"]
    assert len(steps) == 4, "the repaired step is closed, the retry is a step of its own"
    assert len(upstream.received) == 4  # the cut request is in the log too
    assert_rebuilds(sessions, upstream)
