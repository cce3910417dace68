"""Every answer names its session in ``X-Tapelog-Session``, so a client can find its log."""

from __future__ import annotations

from pathlib import Path

from ._helpers import in_process, post, sessions_in

CHAT = "/v1/chat/completions"
BODY = {"model": "deepseek-chat", "messages": [{"role": "user", "content": "hello"}]}


async def test_answers_streamed_or_not_and_errors_name_their_session(tmp_path: Path) -> None:
    script = [{"text": "a"}, {"text": "b"}, {"error": {"status": 503, "message": "busy"}}]
    async with in_process(tmp_path, script=script) as (_, _emu, http):
        plain = await post(http, CHAT, BODY)
        streamed = await post(http, CHAT, {**BODY, "stream": True})
        failed = await post(http, CHAT, BODY)
        refused = await post(http, CHAT, {"model": "deepseek-chat", "messages": []})
    assert [r.status_code for r in (plain, streamed, failed, refused)] == [200, 200, 503, 400]
    sessions = sessions_in(tmp_path)
    named = [r.headers.get("x-tapelog-session") for r in (plain, streamed, failed)]
    assert all(name in sessions for name in named), (named, sorted(sessions))
    # Each answer names the session that logged it: three turns, wherever they went.
    turns = sum(sum(e.type == "turn/start" for e in sessions[name].events) for name in set(named))
    assert turns == 3
    assert "x-tapelog-session" not in refused.headers  # refused before any session


async def test_an_explicit_session_is_named_back(tmp_path: Path) -> None:
    async with in_process(tmp_path) as (_, _emu, http):
        answer = await post(http, "/s/my-run/v1/chat/completions", BODY)
    assert answer.headers["x-tapelog-session"] == "my-run"
