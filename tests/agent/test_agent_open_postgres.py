"""``Agent.open`` on a real PostgreSQL store: create, resume, and every request rebuilds.

Same server as tests/store/test_postgres.py (its ``pg_conninfo`` fixture: a
throwaway server, or ``TAPELOG_TEST_PG``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from store.test_postgres import drop_schema, pg_conninfo, schema_for
from tapelog import LlmCallConfig
from tapelog.agent import Agent, Budget, Limits
from tapelog.audit import encode_request, rebuild_requests
from tapelog.emulator import Emulator
from tapelog.llm import make_client
from tapelog.store import PostgresStore

from ._harness import add

__all__ = ["pg_conninfo"]  # the fixture, used by name


@pytest.fixture
def store(pg_conninfo: str, tmp_path: Path) -> Iterator[PostgresStore]:
    yield PostgresStore(pg_conninfo, schema=schema_for(tmp_path))
    drop_schema(pg_conninfo, schema_for(tmp_path))


async def test_open_creates_then_resumes_a_postgres_session(store: PostgresStore) -> None:
    emulator = Emulator(
        script=[
            {"tool_calls": [{"name": "add", "arguments": '{"a": 2, "b": 2}'}]},
            {"text": "4"},
            {"text": "still 4"},
        ]
    )
    config = LlmCallConfig(provider="emulator", model="emulator-1")
    async with httpx.AsyncClient(transport=emulator.transport()) as http:
        client = make_client(config, http_client=http)
        options = {"client": client, "config": config, "tools": [add]}
        with Agent.open(store, "pg-1", **options) as agent:
            assert agent.opened == "created"
            assert (await agent.run("2 + 2?")).ok
        with Agent.open(
            store, "pg-1", budget=Budget(session=Limits(requests=3)), **options
        ) as agent:
            assert agent.opened == "resumed"
            assert (await agent.run("and again?")).ok
            third = await agent.run("once more")
    assert third.reason["kind"] == "budget"  # three requests were spent, across both opens
    stored = store.load("pg-1").session
    rebuilt = [encode_request(r.request) for r in rebuild_requests(stored)]
    assert rebuilt == [r.body for r in emulator.received]
