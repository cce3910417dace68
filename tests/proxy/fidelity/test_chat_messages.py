"""Chat completions messages carried exactly: developer and system messages
anywhere, and message members the log's blocks do not name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ._carry import MODEL, carry, carry_two

HELLO = {"role": "user", "content": "hello"}


def _body(*messages: dict[str, Any]) -> dict[str, Any]:
    return {"model": MODEL, "messages": list(messages)}


CARRIED: list[tuple[str, list[dict[str, Any]]]] = [
    ("developer first", [{"role": "developer", "content": "Be terse."}, HELLO]),
    ("system later", [HELLO, {"role": "system", "content": "Now in French."}]),
    ("developer later", [HELLO, {"role": "developer", "content": "Answer in one word."}]),
    (
        "system of two parts",
        [
            {
                "role": "system",
                "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            },
            HELLO,
        ],
    ),
    ("system with a name", [{"role": "system", "content": "x", "name": "policy"}, HELLO]),
    ("user name", [{"role": "user", "content": "hi", "name": "bob"}]),
    (
        "assistant refusal and unknown members",
        [
            HELLO,
            {
                "role": "assistant",
                "content": "no",
                "refusal": "I cannot.",
                "annotations": [{"type": "url_citation", "url_citation": {"url": "u"}}],
                "x_vendor": {"b": 1, "a": 2},
            },
            {"role": "user", "content": "why?"},
        ],
    ),
    (
        "assistant with only a refusal",
        [
            HELLO,
            {"role": "assistant", "content": None, "refusal": "I cannot."},
            {"role": "user", "content": "ok"},
        ],
    ),
    (
        "assistant content as parts",
        [
            HELLO,
            {"role": "assistant", "content": [{"type": "text", "text": "a"}]},
            {"role": "user", "content": "ok"},
        ],
    ),
    ("user content one text part", [{"role": "user", "content": [{"type": "text", "text": "a"}]}]),
    ("user empty content list", [HELLO, {"role": "user", "content": []}]),
    ("a null member", [{"role": "user", "content": "hi", "name": None}]),
    (
        "assistant audio reference",
        [
            HELLO,
            {"role": "assistant", "content": None, "audio": {"id": "audio_1"}},
            {"role": "user", "content": "again"},
        ],
    ),
]


@pytest.mark.parametrize("messages", [m for _, m in CARRIED], ids=[n for n, _ in CARRIED])
async def test_a_message_is_carried_as_sent(tmp_path: Path, messages: list[dict[str, Any]]) -> None:
    await carry(tmp_path, [_body(*messages)])


async def test_a_leading_system_text_is_the_header_system_prompt(tmp_path: Path) -> None:
    run = await carry(tmp_path, [_body({"role": "system", "content": "Be terse."}, HELLO)])
    header = next(e for e in run.session.events if e.type == "request/header")
    assert header.data["header"]["system"] == "Be terse."


async def test_a_developer_message_is_logged_with_its_role(tmp_path: Path) -> None:
    body = _body({"role": "developer", "content": "Be terse."}, HELLO)
    run = await carry(tmp_path, [body])
    first = next(e for e in run.session.events if e.type == "user/message")
    assert first.data["role"] == "developer"
    assert (
        "system"
        not in next(e for e in run.session.events if e.type == "request/header").data["header"]
    )


async def test_a_changed_developer_message_is_named_by_the_audit(tmp_path: Path) -> None:
    first = _body({"role": "developer", "content": "Be terse."}, HELLO)
    runs = await carry_two(
        tmp_path,
        first,
        lambda b: {
            **b,
            "messages": [{"role": "developer", "content": "Be verbose."}, *b["messages"][1:]],
        },
    )
    (cause,) = runs.causes(2)
    assert cause["kind"] == "client-edit"
    assert cause["detail"]["message"] == 1, cause


async def test_a_changed_message_member_is_named_by_the_audit(tmp_path: Path) -> None:
    first = _body({"role": "user", "content": "hi", "name": "bob"})
    runs = await carry_two(
        tmp_path,
        first,
        lambda b: {
            **b,
            "messages": [{"role": "user", "content": "hi", "name": "alice"}, *b["messages"][1:]],
        },
    )
    (cause,) = runs.causes(2)
    assert cause["kind"] == "client-edit"
    assert cause["detail"]["message"] == 1, cause
