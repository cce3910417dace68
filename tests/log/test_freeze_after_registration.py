"""A value frozen before a secret was registered is redacted when it is logged.

Issue 16, item a: ``freeze`` returned an already-frozen container as it was, so
a tool schema frozen at import (``@tool``) whose description held a key that
was registered later reached the log in clear. Now each frozen container
remembers the secrets it was made under and is walked again only when other
secrets are in force; what is derived from a log (decoded, or frozen
faithfully) is still never redacted.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tapelog.log import decode, encode, register_secret, secret_scope
from tapelog.log._api import (
    FrozenDict,
    FrozenList,
    Session,
    freeze,
    freeze_faithful,
    freeze_trusted,
    thaw,
)
from tapelog.log._redact import REDACTED, forget_secrets

from ._strategies import json_values

KEY = "sk-late-Key-9b8a7c6d5e4f"
OTHER = "sk-other-Key-1a2b3c4d5e6f"


@pytest.fixture(autouse=True)
def _no_secrets_left() -> Iterator[None]:
    forget_secrets()
    yield
    forget_secrets()


def _schema(secret: str) -> FrozenDict:
    """A tool schema as ``@tool`` makes it: frozen once, at import."""
    schema: FrozenDict = freeze(
        {
            "name": "lookup",
            "description": f"Look a key up (the token is {secret}).",
            "parameters": {"type": "object", "properties": {"key": {"type": "string"}}},
            "examples": [f"token {secret}", "plain"],
        }
    )
    return schema


def test_a_container_frozen_before_the_registration_is_redacted_after_it() -> None:
    schema = _schema(KEY)
    assert KEY in schema["description"]  # nothing was known when it was made
    register_secret(KEY)
    for offered in (schema, {"tools": [schema]}, [schema], schema["examples"]):
        frozen = freeze(offered)
        assert KEY not in str(frozen)
        assert REDACTED in str(frozen)
    assert KEY in schema["description"]  # the frozen original is never changed


def test_a_clean_container_walked_again_is_kept_and_then_is_the_fast_path_again() -> None:
    clean = freeze({"name": "add", "parameters": {"type": "object"}, "tags": ["a", "b"]})
    register_secret(KEY)
    assert freeze(clean) is clean  # walked again, nothing to redact: the same object
    assert freeze(clean["tags"]) is clean["tags"]
    register_secret(OTHER)  # a new secret: walked again once more
    assert freeze({"x": clean})["x"] is clean


def test_a_container_made_under_the_secrets_in_force_is_not_copied() -> None:
    register_secret(KEY)
    made = freeze({"text": f"say {KEY}", "list": [KEY]})
    assert made == {"text": f"say {REDACTED}", "list": [REDACTED]}
    assert freeze(made) is made
    assert freeze([made])[0] is made


def test_frozen_content_appended_or_injected_after_a_registration_is_redacted() -> None:
    content = freeze([{"type": "text", "text": f"the key is {KEY}"}])
    register_secret(KEY)
    session = Session()
    event = session.append(
        "context/message",
        {"content": content, "source": {"kind": "inject"}},
        surface_op="append",
    )
    assert KEY not in event.encode().decode()
    assert KEY not in str(session.derive_messages())


def test_a_scoped_secret_counts_too_and_only_in_its_scope() -> None:
    schema = _schema(KEY)

    async def inside(secret: str) -> Any:
        with secret_scope([secret]):
            return freeze({"tools": [schema]})

    async def main() -> tuple[Any, Any]:
        return await asyncio.gather(inside(KEY), inside(OTHER))

    own, other = asyncio.run(main())
    assert KEY not in str(own)
    assert REDACTED in str(own)
    assert other["tools"][0] is schema  # another request's key is not this one's
    assert freeze(schema) is schema  # outside any scope, nothing is known
    made_in_scope = asyncio.run(inside(OTHER))["tools"][0]
    assert made_in_scope is schema

    async def later() -> Any:  # frozen within one scope, offered within another
        with secret_scope([KEY]):
            return freeze([made_in_scope])

    assert KEY not in str(asyncio.run(later()))


def test_what_is_derived_from_a_log_is_never_redacted() -> None:
    schema = _schema(KEY)
    decoded = freeze_trusted(decode(encode({"tools": [thaw(schema)]})))  # as a store loads it
    assembled = freeze_trusted({"tools": [thaw(schema)]})
    faithful = freeze_faithful({"tools": [thaw(schema)]})
    register_secret(KEY)
    assert freeze_faithful(schema) is schema  # rebuilding never redacts, stale or not
    assert freeze(decoded) is decoded  # a copy of logged data is kept as it is
    assert freeze(assembled) is assembled
    assert freeze(faithful) is faithful
    assert KEY in str(freeze({"request": decoded}))


@settings(max_examples=200, deadline=None)
@given(value=json_values, at=st.integers(min_value=0, max_value=5))
def test_freezing_late_is_freezing_fresh(value: Any, at: int) -> None:
    """Whatever was frozen before the registration, freezing it after gives
    what freezing a plain copy would: the same redaction, nothing else."""
    forget_secrets()
    planted = [value, f"prefix {KEY} suffix"] if at % 2 else {"v": value, "k": KEY}
    early = freeze(planted)
    register_secret(KEY)
    late = freeze(early)
    assert late == freeze(thaw(early))
    assert KEY not in str(late)
    assert isinstance(late, FrozenDict | FrozenList)
