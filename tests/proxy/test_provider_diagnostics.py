"""A provider's own cache diagnostics: logged as given, shown by ``tapelog cache``
beside the audit's causes, and a disagreement flagged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tapelog.audit import cache_report
from tapelog.audit._cache_cause import CacheCause
from tapelog.audit._provider_verdict import agrees, provider_verdict
from tapelog.cli import cli
from tapelog.emulator import Emulator

from ._helpers import in_process, post, sessions_in

CHAT = "/v1/chat/completions"


def _tools(order: list[str]) -> list[dict[str, Any]]:
    properties = {name: {"type": "string"} for name in order}
    schema = {"type": "object", "properties": properties}
    return [{"type": "function", "function": {"name": "lookup", "parameters": schema}}]


async def test_the_providers_verdict_is_logged_and_shown_beside_the_audit(tmp_path: Path) -> None:
    emulator = Emulator(cache_diagnostics=True)
    first = [{"role": "system", "content": "Be brief. " * 50}, {"role": "user", "content": "a?"}]
    other = [{"role": "user", "content": "another conversation " * 20}]
    async with in_process(tmp_path, emulator=emulator) as (_, _emu, http):
        body = {"model": "deepseek-chat", "messages": first, "tools": _tools(["w", "l"])}
        answer = (await post(http, CHAT, body)).json()
        # Another client's conversation in between: the provider compares it with
        # the last request it saw, which the log of its own session does not hold.
        assert (await post(http, CHAT, {"model": "deepseek-chat", "messages": other})).is_success
        message = {"role": "assistant", "content": answer["choices"][0]["message"]["content"]}
        again = [*first, message, {"role": "user", "content": "b?"}]
        reordered = {**body, "messages": again, "tools": _tools(["l", "w"])}
        assert (await post(http, CHAT, reordered)).is_success
    sessions = sessions_in(tmp_path)
    main = next(s for s in sessions.values() if len(cache_report(s).requests) == 2)
    lone = next(s for s in sessions.values() if s is not main)
    answers = [e for e in main.events if e.type == "assistant/message"]
    given = answers[-1].data["usage"]["cache_diagnostics"]
    assert given["type"] == "cache_miss"
    assert given["reason"] == "tools_changed"
    assert given["cache_missed_tokens"] > 0
    row = cache_report(main).requests[1]
    assert (row.provider_verdict, row.provider_agrees) == ("tools_changed", True)
    assert row.to_json()["provider_verdict"] == {"verdict": "tools_changed", "agrees": True}
    assert row.to_json()["provider"] == row.provider  # the request's provider, kept
    (alone,) = cache_report(lone).requests
    # Compared with the other conversation (which has a tool): tools changed,
    # but this session's log holds one first request, nothing changed.
    assert (alone.provider_verdict, alone.provider_agrees) == ("tools_changed", False)
    shown = CliRunner().invoke(cli, ["cache", lone.id, "--store", str(tmp_path)])
    assert shown.exit_code == 0, shown.output
    assert "provider: tools_changed (disagrees)" in shown.output
    assert "the provider says tools_changed, but the log shows no change" in shown.output
    shown = CliRunner().invoke(cli, ["cache", main.id, "--store", str(tmp_path)])
    assert "provider: tools_changed" in shown.output
    assert "disagrees" not in shown.output


def _cause(kind: str, **detail: Any) -> CacheCause:
    return CacheCause(kind=kind, seqs=(), detail=detail)


@pytest.mark.parametrize(
    ("diagnostics", "causes", "verdict", "agreed"),
    [
        ({"cache_miss_reason": None}, [], "no-divergence", True),
        (
            {"cache_miss_reason": {"type": "tools_changed"}},
            [_cause("header-delta", tools={"changed": ["f"]})],
            "tools_changed",
            True,
        ),
        (
            {"cache_miss_reason": {"type": "system_changed"}},
            [_cause("client-edit")],
            "system_changed",
            False,
        ),
        (
            {"cache_miss_reason": {"type": "previous_message_not_found"}},
            [],
            "previous_message_not_found",
            None,
        ),
        ({"type": "cache_hit"}, [_cause("client-edit")], "no-divergence", False),
        (
            {"type": "cache_miss", "reason": "model_changed"},
            [_cause("header-delta", config={"model": ["a", "b"]})],
            "model_changed",
            True,
        ),
        (
            {"type": "cache_miss", "reason": "messages_changed"},
            [_cause("unexplained", reason="prefix changed")],
            "messages_changed",
            None,
        ),
        ({"type": "unavailable"}, [], "unavailable", None),
    ],
)
def test_verdicts_read_both_shapes_and_are_checked_against_the_causes(
    diagnostics: dict[str, Any], causes: list[CacheCause], verdict: str, agreed: bool | None
) -> None:
    found = provider_verdict({"cache_diagnostics": diagnostics})
    assert found == verdict
    assert agrees(found, causes) is agreed
    assert provider_verdict({"input": 1}) is None
