"""Which session a request belongs to, and what is logged when the client changes history.

Explicit (path prefix or header), extend, edit (a logged replace), fork, new;
parallel conversations through one proxy never share a session.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from openai import AsyncOpenAI

from tapelog.log import decode
from tapelog.proxy._translate import Translator
from tapelog.store import JsonlStore

from ._helpers import SECRET, assert_no_secret, assert_rebuilds, in_process, post, sessions_in

MODEL = "deepseek-chat"
PATH = "/v1/chat/completions"


def _user_texts(session: Any) -> list[str]:
    return [
        m["content"][0]["text"]
        for m in session.derive_messages()
        if m["role"] == "user" and m["content"]
    ]


def _replaces(session: Any) -> list[Any]:
    return [e for e in session.events if isinstance(e.surface_op, dict)]


async def test_four_concurrent_conversations_get_four_sessions(tmp_path: Path) -> None:
    async with in_process(tmp_path) as (_, emu, http):
        client = AsyncOpenAI(base_url="http://127.0.0.1/v1", api_key=SECRET, http_client=http)

        async def converse(tag: str) -> None:
            messages: list[Any] = [{"role": "user", "content": f"{tag}: hello"}]
            for turn in range(3):
                answer = await client.chat.completions.create(model=MODEL, messages=messages)
                messages.append({"role": "assistant", "content": answer.choices[0].message.content})
                messages.append({"role": "user", "content": f"{tag}: question {turn}"})

        await asyncio.gather(*(converse(tag) for tag in ("alpha", "beta", "gamma", "delta")))
    sessions = sessions_in(tmp_path)
    assert len(sessions) == 4
    for session in sessions.values():
        tags = {text.split(":")[0] for text in _user_texts(session)}
        assert len(tags) == 1, tags
        assert not _replaces(session)
    assert_rebuilds(sessions, emu)
    assert len(emu.received) == 12


async def test_conversations_that_open_alike_stay_apart(tmp_path: Path) -> None:
    """Two clients send the same first message (and get the same answer): the
    sessions are indistinguishable until the clients diverge, then each one
    holds one conversation."""
    async with in_process(tmp_path) as (_, emu, http):
        histories: dict[str, list[Any]] = {
            tag: [{"role": "user", "content": "hello"}] for tag in ("a", "b")
        }

        async def step(tag: str) -> None:
            response = await post(http, PATH, {"model": MODEL, "messages": histories[tag]})
            assert response.status_code == 200, response.text
            text = response.json()["choices"][0]["message"]["content"]
            turn = len(histories[tag]) // 2
            histories[tag] += [
                {"role": "assistant", "content": text},
                {"role": "user", "content": f"{tag} {turn}"},
            ]

        await asyncio.gather(step("a"), step("b"))  # at once: two new sessions
        for _ in range(2):
            await step("a")
            await step("b")
        await asyncio.gather(step("a"), step("b"))
    sessions = sessions_in(tmp_path)
    assert len(sessions) == 2
    for session in sessions.values():
        tags = {text.split()[0] for text in _user_texts(session) if text != "hello"}
        assert len(tags) == 1, _user_texts(session)
    assert_rebuilds(sessions, emu)


async def test_explicit_session_by_header_and_by_path(tmp_path: Path) -> None:
    lines: list[str] = []
    async with in_process(tmp_path, lines=lines) as (_, emu, http):
        first: list[Any] = [{"role": "user", "content": "one"}]
        response = await post(
            http, PATH, {"model": MODEL, "messages": first}, **{"X-Tapelog-Session": "my-run"}
        )
        assert response.status_code == 200
        answer = response.json()["choices"][0]["message"]["content"]
        second = [
            *first,
            {"role": "assistant", "content": answer},
            {"role": "user", "content": "two"},
        ]
        response = await post(http, "/s/my-run" + PATH, {"model": MODEL, "messages": second})
        assert response.status_code == 200
        # Named explicitly, an unrelated conversation replaces the session's history.
        third = [{"role": "user", "content": "three"}]
        response = await post(
            http, "/s/my-run/chat/completions", {"model": MODEL, "messages": third}
        )
        assert response.status_code == 200
        bad = await post(http, "/s/..bad/v1/chat/completions", {"model": MODEL, "messages": third})
    assert bad.status_code == 400
    assert "invalid session id" in bad.json()["error"]["message"]
    sessions = sessions_in(tmp_path)
    assert list(sessions) == ["my-run"]
    session = sessions["my-run"]
    (replace,) = _replaces(session)
    first = next(e for e in session.events if e.type == "user/message")
    assert replace.type == "user/message"
    assert replace.surface_op["start"] == first.seq, "from the first message to the end"
    assert replace.surface_op["end"] < replace.seq
    assert _user_texts(session) == ["three"]
    assert all("x-tapelog-session" not in r.headers for r in emu.received)
    assert_rebuilds(sessions, emu)
    assert "client changed messages[0]" in lines[2]


async def test_rewritten_tool_arguments_are_a_replace_and_still_rebuild(tmp_path: Path) -> None:
    script = [
        {"tool_calls": [{"name": "add", "arguments": '{"a": 1, "b": 2}'}]},
        {"text": "3"},
    ]
    lines: list[str] = []
    async with in_process(tmp_path, script=script, lines=lines) as (_, emu, http):
        messages: list[Any] = [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "1 + 2?"},
        ]
        first = await post(http, PATH, {"model": MODEL, "messages": messages})
        call = first.json()["choices"][0]["message"]["tool_calls"][0]
        # The client parses the arguments and writes them back its own way.
        call["function"]["arguments"] = '{"a":1,"b":2}'
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": "3"})
        second = await post(http, PATH, {"model": MODEL, "messages": messages})
        assert second.status_code == 200
    sessions = sessions_in(tmp_path)
    assert len(sessions) == 1, "the loose match found the conversation"
    (session,) = sessions.values()
    (replace,) = _replaces(session)
    assert replace.type == "assistant/message"
    assert replace.data["source"]["kind"] == "client"
    assert replace.data["content"][0]["arguments"] == '{"a":1,"b":2}'
    assert "client changed messages[2]" in lines[1]
    sent = decode(emu.received[1].body)["messages"][2]["tool_calls"][0]["function"]
    assert sent["arguments"] == '{"a":1,"b":2}', "the upstream got what the client sent"
    assert_rebuilds(sessions, emu)


async def test_a_timestamp_injected_in_the_first_message_keeps_the_session(tmp_path: Path) -> None:
    lines: list[str] = []
    async with in_process(tmp_path, lines=lines) as (_, emu, http):
        messages: list[Any] = [{"role": "user", "content": "[12:00] hello"}]
        for minute, question in ((1, "next"), (2, "and then")):
            response = await post(http, PATH, {"model": MODEL, "messages": messages})
            answer = response.json()["choices"][0]["message"]["content"]
            messages[0] = {"role": "user", "content": f"[12:0{minute}] hello"}
            messages += [
                {"role": "assistant", "content": answer},
                {"role": "user", "content": question},
            ]
        await post(http, PATH, {"model": MODEL, "messages": messages})
    sessions = sessions_in(tmp_path)
    assert len(sessions) == 1
    (session,) = sessions.values()
    assert len(_replaces(session)) == 2
    assert _user_texts(session)[0] == "[12:02] hello"
    assert "client changed messages[0]" in lines[1]
    assert "client changed messages[0]" in lines[2]
    assert_rebuilds(sessions, emu)


async def test_a_regenerated_answer_is_a_fork(tmp_path: Path) -> None:
    lines: list[str] = []
    async with in_process(tmp_path, lines=lines) as (_, emu, http):
        history: list[Any] = [{"role": "user", "content": "hi"}]
        response = await post(http, PATH, {"model": MODEL, "messages": history})
        history.append(response.json()["choices"][0]["message"])
        await post(
            http, PATH, {"model": MODEL, "messages": [*history, {"role": "user", "content": "x"}]}
        )
        # The user edits the last question instead: a branch from the first turn.
        await post(
            http, PATH, {"model": MODEL, "messages": [*history, {"role": "user", "content": "y"}]}
        )
    sessions = sessions_in(tmp_path)
    assert len(sessions) == 2
    child = next(s for s in sessions.values() if s.info.parent is not None)
    parent = sessions[child.info.parent]  # type: ignore[index]
    assert _user_texts(parent) == ["hi", "x"]
    assert _user_texts(child) == ["hi", "y"]
    assert any(e.type == "session/end-seed" for e in child.events)
    assert f"forked from {parent.id}" in lines[2]
    assert_rebuilds(sessions, emu)


async def test_an_upstream_error_passes_through_and_the_retry_continues(tmp_path: Path) -> None:
    script = [{"error": {"status": 429, "message": f"slow down, {SECRET}"}}, {"text": "fine"}]
    lines: list[str] = []
    async with in_process(tmp_path, script=script, lines=lines) as (_, emu, http):
        body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
        failed = await post(http, PATH, body)
        retried = await post(http, PATH, body)
    assert failed.status_code == 429
    assert failed.headers["retry-after"] == "0"
    assert failed.json()["error"]["message"].startswith("slow down")
    assert retried.json()["choices"][0]["message"]["content"] == "fine"
    sessions = sessions_in(tmp_path)
    assert len(sessions) == 1
    (session,) = sessions.values()
    ends = [e.data["reason"]["kind"] for e in session.events if e.type == "turn/end"]
    assert ends == ["error", "completed"]
    assert _user_texts(session) == ["hi"], "the retry added nothing"
    assert_rebuilds(sessions, emu)
    assert "HTTP 429" in lines[0]
    assert_no_secret(tmp_path, *lines)


async def test_header_changes_are_named_per_request(tmp_path: Path) -> None:
    tool = {"type": "function", "function": {"name": "b_tool", "parameters": {"type": "object"}}}
    other = {"type": "function", "function": {"name": "a_tool", "parameters": {"type": "object"}}}
    lines: list[str] = []
    async with in_process(tmp_path, lines=lines) as (_, emu, http):
        messages: list[Any] = [
            {"role": "system", "content": "Rule one.\nRule two."},
            {"role": "user", "content": "hi"},
        ]
        variants: list[dict[str, Any]] = [
            {"tools": [tool]},
            {"tools": [tool, other]},  # added at the end
            {"tools": [other, tool]},  # reordered
            {"tools": [other, tool], "temperature": 0.5},
            {"tools": [other, tool], "temperature": 0.5, "model": "deepseek-reasoner"},
        ]
        for i, variant in enumerate(variants):
            if i == 4:
                messages[0] = {"role": "system", "content": "Rule one.\nRule 2."}
            body = {"model": MODEL, "messages": messages, **variant}
            response = await post(http, PATH, body)
            assert response.status_code == 200, response.text
            messages += [
                response.json()["choices"][0]["message"],
                {"role": "user", "content": str(i)},
            ]
    assert "new session" in lines[0]
    assert "tool a_tool added at the end" in lines[1]
    assert "tools reordered" in lines[2]
    assert "temperature changed" in lines[3]
    assert "model deepseek-chat -> deepseek-reasoner" in lines[4]
    assert "system prompt changed from line 2" in lines[4]
    assert all("prompt tokens cached" in line for line in lines)
    sessions = sessions_in(tmp_path)
    assert len(sessions) == 1
    assert_rebuilds(sessions, emu)


async def test_the_session_index_is_kept_in_the_store_and_rebuilt_without_it(
    tmp_path: Path,
) -> None:
    async with in_process(tmp_path) as (proxy, _, http):
        messages: list[Any] = [{"role": "user", "content": "hi"}]
        response = await post(http, PATH, {"model": MODEL, "messages": messages})
        messages += [response.json()["choices"][0]["message"], {"role": "user", "content": "more"}]
    (session_id,) = sessions_in(tmp_path)
    index = tmp_path / ".index" / "points.jsonl"
    assert session_id.encode() in index.read_bytes()
    async with in_process(tmp_path) as (proxy, _emu, http):
        assert await proxy.start() == 1
        assert proxy.index.end(session_id) is not None
        response = await post(http, PATH, {"model": MODEL, "messages": messages})
        assert response.status_code == 200
    assert list(sessions_in(tmp_path)) == [session_id]
    # The index is derived from the sessions: without it, a proxy rebuilds it.
    index.unlink()
    async with in_process(tmp_path) as (proxy, _emu, http):
        assert await proxy.start() == 1
        assert proxy.index.end(session_id) is not None
    assert session_id.encode() in index.read_bytes()
    # A proxy that rebuilds no stored session starts new ones.
    index.unlink()
    async with in_process(tmp_path, scan_limit=0) as (proxy, _, http):
        assert await proxy.start() == 0
        await post(http, PATH, {"model": MODEL, "messages": messages})
    assert len(sessions_in(tmp_path)) == 2
    assert JsonlStore(tmp_path).load(session_id).session.header is not None


async def test_a_stream_the_upstream_cuts_is_an_error_and_the_retry_continues(
    tmp_path: Path,
) -> None:
    script = [{"text": "an answer that is cut short", "cut_after": 3}, {"text": "whole"}]
    async with in_process(tmp_path, script=script) as (_, emu, http):
        body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": True}
        cut = await post(http, PATH, body)
        again = await post(http, PATH, body)
    assert cut.status_code == 200
    assert "[DONE]" not in cut.text, "the client got the cut stream as it was"
    assert cut.text.endswith("\n\n")
    last = cut.text.rstrip("\n").rsplit("\n\n", 1)[-1]
    assert last.startswith('data: {"error":'), "and then the API's error event"
    assert "ended before the model finished" in last
    assert "whole" in again.text
    assert "[DONE]" in again.text
    (session,) = sessions_in(tmp_path).values()
    ends = [e.data["reason"] for e in session.events if e.type == "turn/end"]
    assert [r["kind"] for r in ends] == ["error", "completed"]
    assert "ended before the model finished" in ends[0]["error"]["message"]
    first = next(e for e in session.events if e.type == "assistant/message")
    assert first.data["content"] == []
    assert first.data["interrupted"] is True
    pieces = [
        e.data["chunk"].get("text", "")
        for e in session.events
        if e.type == "assistant/chunk" and e.data["turn"] == 1
    ]
    assert "".join(pieces), "what arrived stays in the chunks"
    assert_rebuilds({session.id: session}, emu)


async def test_an_error_inside_the_stream_is_a_502_for_a_json_client(tmp_path: Path) -> None:
    script = [{"error": {"status": 500, "message": "boom"}, "in_stream": True}]
    async with in_process(tmp_path, script=script) as (_, emu, http):
        body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
        failed = await post(http, PATH, body)
    assert failed.status_code == 502
    assert "boom" in failed.json()["error"]["message"]
    (session,) = sessions_in(tmp_path).values()
    end = [e for e in session.events if e.type == "turn/end"][-1]
    assert end.data["reason"]["kind"] == "error"
    assert_rebuilds({session.id: session}, emu)


async def test_reasoning_a_client_stops_sending_back_is_a_replace(tmp_path: Path) -> None:
    """DeepSeek: the client sends each answer's reasoning back, then keeps it only
    for the latest answer: the older message changed for the model (a replace),
    and the send-back rule in the logged config says how the client sends it."""
    script = [
        {"reasoning": "think one", "tool_calls": [{"name": "add", "arguments": "{}"}]},
        {"reasoning": "think two", "tool_calls": [{"name": "add", "arguments": "{}"}]},
        {"text": "done"},
    ]
    lines: list[str] = []
    async with in_process(tmp_path, script=script, lines=lines) as (_, emu, http):
        messages: list[Any] = [{"role": "user", "content": "go"}]
        answers = []
        for _ in range(3):
            response = await post(http, PATH, {"model": MODEL, "messages": messages})
            answer = response.json()["choices"][0]["message"]
            answers.append(answer)
            if not answer.get("tool_calls"):
                break
            if len(answers) == 2:  # keep only the latest answer's reasoning
                first = {k: v for k, v in messages[1].items() if k != "reasoning_content"}
                messages[1] = first
            messages += [
                answer,
                {"role": "tool", "tool_call_id": answer["tool_calls"][0]["id"], "content": "0"},
            ]
    assert answers[0]["reasoning_content"] == "think one"
    (session,) = sessions_in(tmp_path).values()
    (replace,) = _replaces(session)
    assert replace.type == "assistant/message"
    assert not any(b["type"] == "reasoning" for b in replace.data["content"])
    sent = decode(emu.received[2].body)["messages"]
    assert "reasoning_content" not in sent[1]
    assert sent[3]["reasoning_content"] == "think two"
    assert "client changed messages[1]" in lines[2]
    assert "wire.reasoning_send_back -> present" in lines[2]
    assert_rebuilds({session.id: session}, emu)


async def test_the_header_is_made_once_per_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The header checked against the client's body is the one logged and sent
    (made again only when the session's own send-back rule picks another):
    one ``Translator.header`` per request, and the bodies still rebuild."""
    made: list[object] = []
    header = Translator.header

    def counted(self: Translator, *args: Any) -> Any:
        made.append(args)
        return header(self, *args)

    monkeypatch.setattr(Translator, "header", counted)
    async with in_process(tmp_path) as (_, emu, http):
        messages: list[Any] = [{"role": "user", "content": "go"}]
        for i in range(3):
            response = await post(http, PATH, {"model": MODEL, "messages": messages})
            assert response.status_code == 200, response.text
            answer = response.json()["choices"][0]["message"]
            messages += [answer, {"role": "user", "content": f"more {i}"}]
    assert len(made) == 3
    (session,) = sessions_in(tmp_path).values()
    assert_rebuilds({session.id: session}, emu)


async def test_the_last_request_sent_again_continues_its_session(tmp_path: Path) -> None:
    """A client whose answer was lost (a replica died after logging it) sends the
    same request again: the session goes on, the earlier answer replaced."""
    lines: list[str] = []
    async with in_process(tmp_path, lines=lines) as (_, emu, http):
        history: list[Any] = [{"role": "user", "content": "hi"}]
        first = await post(http, PATH, {"model": MODEL, "messages": history})
        history += [first.json()["choices"][0]["message"], {"role": "user", "content": "x"}]
        await post(http, PATH, {"model": MODEL, "messages": history})
        again = await post(http, PATH, {"model": MODEL, "messages": history})
        history += [again.json()["choices"][0]["message"], {"role": "user", "content": "y"}]
        await post(http, PATH, {"model": MODEL, "messages": history})
    sessions = sessions_in(tmp_path)
    assert len(sessions) == 1
    (session,) = sessions.values()
    assert "the last request again: its earlier answer replaced" in lines[2]
    assert not any("forked" in line or "new session" in line for line in lines[1:])
    replaced = [e for e in session.events if isinstance(e.surface_op, dict)]
    assert [e.type for e in replaced] == ["user/message"]
    assert _user_texts(session)[-3:] == ["hi", "x", "y"]
    assert_rebuilds(sessions, emu)


async def test_a_deleted_session_in_the_index_is_forgotten(tmp_path: Path) -> None:
    async with in_process(tmp_path) as (_, _emu, http):
        history: list[Any] = [{"role": "user", "content": "hi"}]
        first = await post(http, PATH, {"model": MODEL, "messages": history})
        history += [first.json()["choices"][0]["message"], {"role": "user", "content": "x"}]
    (gone,) = sessions_in(tmp_path)
    (tmp_path / f"{gone}.jsonl").unlink()
    async with in_process(tmp_path) as (_, _emu, http):
        again = await post(http, PATH, {"model": MODEL, "messages": history})
    assert again.status_code == 200, again.text
    (session_id,) = sessions_in(tmp_path)
    assert session_id != gone
