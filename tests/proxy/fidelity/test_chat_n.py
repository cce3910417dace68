"""``n`` > 1: carried, every choice logged and answered, and the next request,
holding the choice the client kept, continues the session."""

from __future__ import annotations

from pathlib import Path

from tapelog.log import decode

from .._helpers import assert_rebuilds, in_process, post, sessions_in
from ._carry import CHAT, MODEL, assert_carried

HELLO = [{"role": "user", "content": "hello"}]
SCRIPT = [{"text": "Hi."}, {"text": "Fine."}]


async def test_every_choice_is_answered_logged_and_the_kept_one_continues(tmp_path: Path) -> None:
    first = {"model": MODEL, "messages": HELLO, "n": 3}
    async with in_process(tmp_path, provider="openai", script=SCRIPT) as (_, emu, http):
        answer = await post(http, CHAT, first)
        choices = answer.json()["choices"]
        kept = choices[1]["message"]
        second = {
            "model": MODEL,
            "messages": [*HELLO, {"role": "assistant", "content": kept["content"]}, HELLO[0]],
        }
        again = await post(http, CHAT, second)
    assert [c["index"] for c in choices] == [0, 1, 2]
    assert [c["message"]["content"] for c in choices] == ["Hi.", "Hi. (choice 2)", "Hi. (choice 3)"]
    assert again.status_code == 200
    for body, got in zip([first, second], emu.received, strict=True):
        assert_carried(body, decode(got.body))
    sessions = sessions_in(tmp_path)
    assert_rebuilds(sessions, emu)
    (session,) = sessions.values()  # the kept choice continues the session
    answers = [e for e in session.events if e.type == "assistant/message"]
    assert answers[0].data["content"] == [{"type": "text", "text": "Hi."}]
    assert [
        (a["choice"], a["content"][0]["text"], a["finish"]) for a in answers[0].data["alternatives"]
    ] == [(1, "Hi. (choice 2)", "stop"), (2, "Hi. (choice 3)", "stop")]
    # The client kept choice 2: its message replaces the logged answer in the history.
    client = [e for e in answers if e.data["source"].get("kind") == "client"]
    assert client[0].data["content"] == [{"type": "text", "text": "Hi. (choice 2)"}]
    assert client[0].surface_op != "append"


async def test_a_streaming_client_gets_every_choice(tmp_path: Path) -> None:
    body = {"model": MODEL, "messages": HELLO, "n": 2, "stream": True}
    async with in_process(tmp_path, provider="openai", script=SCRIPT) as (_, emu, http):
        answer = await post(http, CHAT, body)
    texts: dict[int, str] = {}
    for line in answer.text.splitlines():
        if line.startswith("data: {"):
            for choice in decode(line[6:])["choices"]:
                texts[choice["index"]] = texts.get(choice["index"], "") + (
                    choice["delta"].get("content") or ""
                )
    assert texts == {0: "Hi.", 1: "Hi. (choice 2)"}
    assert_carried(body, decode(emu.received[0].body))
    assert_rebuilds(sessions_in(tmp_path), emu)
