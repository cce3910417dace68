"""Agent frameworks through ``tapelog proxy``, with the proxy process restarted mid-conversation.

pydantic-ai (its OpenAI chat and Anthropic models) and the OpenAI Agents SDK
each run a two-turn tool conversation: once against the emulator directly,
once through the proxy, where the first turn goes through one ``tapelog
proxy`` process and the second through a new one over the same store. The
framework must see the same thing both ways, the emulator must have received
exactly the requests the stored log rebuilds, the restart must continue the
same session, the audit commands must run on it and explain every cache
break, and the key the framework sent must be nowhere in the store or the
proxy's output.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

import httpx
import pytest
from agents import Agent as AgentsAgent
from agents import Runner, set_default_openai_api
from click.testing import CliRunner
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.exceptions import ModelHTTPError

from tapelog.cli import cli
from tapelog.emulator import Emulator
from tapelog.log import decode, encode

from ._frameworks import FRAMEWORKS, PROMPTS, SCRIPT, Framework, Turn, proxy_process, without
from ._helpers import (
    SECRET,
    assert_no_secret,
    own_requests,
    proxy_on,
    serve,
    sessions_in,
    upstream_for,
)

Endpoint = Callable[[], AbstractContextManager[str]]

# How many history messages each framework sends differently from what it got,
# per conversation: pydantic-ai's OpenAI model re-serializes the tool arguments
# of each answer it sends back ('{"a": 1, "b": 2}' -> '{"a":1,"b":2}'), so the
# proxy logs a client replace on the two requests that carry a new tool call.
CLIENT_REWRITES = {"pydantic-ai-openai": 2, "pydantic-ai-anthropic": 0, "openai-agents": 0}

# Where what a framework sees through the proxy differs from what it sees
# directly, and only in the usage it is told (docs/proxy.md):
USAGE_DIFFERS = {
    # (pydantic-ai's Anthropic model sends '"is_error": false' in every tool
    # result: carried as given, so it costs the same tokens through the proxy.)
    # The proxy streams from the upstream with usage and passes the usage event
    # on; the Agents SDK does not ask for it when it streams, so directly it is
    # told zero tokens and through the proxy the real counts.
    ("openai-agents", True): '"stream_options":{"include_usage":true}',
}

CASES = [
    pytest.param("pydantic-ai-openai", False, id="pydantic-ai-openai-json"),
    pytest.param("pydantic-ai-openai", True, id="pydantic-ai-openai-stream"),
    # Its Anthropic client streams from the API either way: one case covers both.
    pytest.param("pydantic-ai-anthropic", False, id="pydantic-ai-anthropic"),
    pytest.param("openai-agents", False, id="openai-agents-json"),
    pytest.param("openai-agents", True, id="openai-agents-stream"),
]


async def converse(framework: Framework, stream: bool, endpoints: list[Endpoint]) -> list[Turn]:
    """The scripted conversation, turn ``i`` against the base URL ``endpoints[i]`` gives."""
    turns: list[Turn] = []
    history: Any = None
    for prompt, endpoint in zip(PROMPTS, endpoints, strict=True):
        with endpoint() as base_url:
            turn = await framework.turn(base_url, prompt, history, stream)
        turns.append(turn)
        history = turn.history
    return turns


def as_read(body: bytes) -> Any:
    """A request body as a provider reads it: key order, ``stream`` /
    ``stream_options`` (the proxy always streams from the upstream), cache
    breakpoints and ``"is_error": false`` aside."""
    value = without(decode(body), frozenset({"stream", "stream_options", "cache_control"}))
    return _no_false_errors(value)


def _no_false_errors(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _no_false_errors(v) for k, v in value.items() if (k, v) != ("is_error", False)}
    if isinstance(value, list):
        return [_no_false_errors(v) for v in value]
    return value


def cli_json(*args: str) -> Any:
    result = CliRunner().invoke(cli, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return decode(result.output)


@pytest.mark.parametrize(("name", "stream"), CASES)
async def test_a_framework_through_a_restarted_proxy_sees_what_it_sees_directly(
    tmp_path: Path, name: str, stream: bool
) -> None:
    framework = FRAMEWORKS[name]
    direct = Emulator(script=SCRIPT)
    with serve(direct.app) as port:
        url = framework.direct_url(port)
        expected = await converse(framework, stream, [lambda: nullcontext(url)] * 2)

    store = tmp_path / "sessions"
    output: list[str] = []
    upstream = Emulator(script=SCRIPT)
    with serve(upstream.app) as port:

        @contextmanager
        def a_new_proxy() -> Iterator[str]:
            with proxy_process(store, framework.provider, port, output) as proxy_port:
                yield framework.proxy_url(proxy_port)

        got = await converse(framework, stream, [a_new_proxy, a_new_proxy])

    # The framework saw what it sees without the proxy: answers, tool calls, usage;
    # and the upstream read what it reads without the proxy.
    assert [t.output for t in got] == ["1 + 2 = 3", "3 + 4 = 7"]
    assert [t.output for t in got] == [t.output for t in expected]
    differs = USAGE_DIFFERS.get((name, stream))
    aside = frozenset({"usage"} if differs else ())
    assert without([t.seen for t in got], aside) == without([t.seen for t in expected], aside)
    assert (got[0].seen == expected[0].seen) is (differs is None)
    direct_bodies = [r.body for r in direct.received]
    assert [as_read(r.body) for r in upstream.received] == [as_read(b) for b in direct_bodies]
    if differs is not None:  # the bytes behind the difference: sent one way only
        proxied = upstream.received[1].body
        assert (differs.encode() in direct_bodies[1]) != (differs.encode() in proxied)

    # One session across the restart, verified; every request rebuilds byte for byte.
    sessions = sessions_in(store)
    assert len(sessions) == 1, output
    ((session_id, session),) = sessions.items()
    received = [r.body for r in upstream.received]
    assert len(received) == 4
    assert own_requests(session) == received
    snapshots = [e.data["reason"] for e in session.events if e.type == "request/header"]
    assert snapshots == ["initial", "resume"], "the second process resumed the session"
    replaces = [e for e in session.events if isinstance(e.surface_op, dict)]
    assert len(replaces) == CLIENT_REWRITES[name]

    # The audit commands run on the proxied session, and every break is explained.
    runner = CliRunner()
    verified = runner.invoke(cli, ["verify", session_id, "--store", str(store)])
    assert verified.exit_code == 0, verified.output
    cache = cli_json("cache", session_id, "--store", str(store))
    assert [row["index"] for row in cache["requests"]] == [1, 2, 3, 4]
    causes = [c["kind"] for row in cache["requests"] for c in row["causes"]]
    assert "unexplained" not in causes
    assert cache["totals"]["efficiency"] == 1.0, "the provider cached what the rule expects"

    # One line per request, all in this session; only the first one opened it.
    lines = [line for line in output if line.startswith(session_id)]
    assert len(lines) == 4, output
    assert "new session" in lines[0]
    assert not any("new session" in line or "forked" in line for line in lines[1:])
    assert sum("client changed messages[" in line for line in lines) == CLIENT_REWRITES[name]

    # The key reached the upstream in the header it reaches it directly (the
    # emulator records it redacted) and is in no stored byte, no proxy output
    # and no audit output.
    def credentials(emulator: Emulator) -> list[set[str]]:
        return [{k for k, v in r.headers.items() if v == "[redacted]"} for r in emulator.received]

    assert credentials(upstream) == credentials(direct)
    assert all(credentials(upstream))
    report = runner.invoke(cli, ["requests", session_id, "--store", str(store)])
    assert report.exit_code == 0, report.output
    assert_no_secret(store, *output, verified.output, report.output)
    assert SECRET not in str(cache)


async def test_the_environment_variables_the_proxy_prints_route_the_frameworks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The setup lines of docs/proxy.md: only environment variables and model names.

    pydantic-ai's ``openai-chat:`` and ``anthropic:`` models and the Agents
    SDK's default client read the variables ``tapelog proxy`` prints; the
    proxy serves chat completions, so the Agents SDK is told to use them, and
    pydantic-ai's ``openai:`` models (the Responses API) reach nothing.
    """
    upstreams = {"deepseek": Emulator(), "anthropic": Emulator()}
    stores = {name: tmp_path / name for name in upstreams}
    with (
        serve(upstreams["deepseek"].app) as openai_port,
        serve(upstreams["anthropic"].app) as anthropic_port,
        proxy_on(stores["deepseek"], upstream_for("deepseek", openai_port)) as openai_proxy,
        proxy_on(stores["anthropic"], upstream_for("anthropic", anthropic_port)) as proxy,
    ):
        monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{openai_proxy}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", SECRET)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{proxy}")
        monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)

        chat = PydanticAgent("openai-chat:deepseek-chat")
        claude = PydanticAgent("anthropic:claude-sonnet-4-5")
        responses = PydanticAgent("openai:deepseek-chat")
        async with chat, claude, responses:
            assert (await chat.run("hello")).output == "ok: hello"
            assert (await claude.run("hello")).output == "ok: hello"
            with pytest.raises(ModelHTTPError) as refused:
                await responses.run("hello")
        assert refused.value.status_code == 404

        set_default_openai_api("chat_completions")
        try:
            agent = AgentsAgent(name="assistant", model="deepseek-chat")
            assert (await Runner.run(agent, "hello")).final_output == "ok: hello"
        finally:
            set_default_openai_api("responses")

    for name, emulator in upstreams.items():
        sessions = sessions_in(stores[name])
        assert len(sessions) == len(emulator.received) == (2 if name == "deepseek" else 1)
        assert sorted(b for s in sessions.values() for b in own_requests(s)) == sorted(
            r.body for r in emulator.received
        )
        assert_no_secret(stores[name])


# A tool call whose arguments are long enough that DeepSeek's cached prefix
# through the answer is worth whole 64-token units more than the prompt alone.
LONG_ARGUMENTS = '{"a": 1, "b": 2, "note": "' + "x " * 300 + '"}'


async def _rewritten_answer(tmp_path: Path) -> tuple[Emulator, str, list[str]]:
    """pydantic-ai through the proxy, answered with a call of ``LONG_ARGUMENTS``
    (which it sends back re-serialized); the emulator, the session and the lines."""
    upstream = Emulator(script=[{"tool_calls": [{"name": "add", "arguments": LONG_ARGUMENTS}]}])
    upstream.push({"text": "3"})
    lines: list[str] = []
    with (
        serve(upstream.app) as port,
        proxy_on(tmp_path, upstream_for("deepseek", port), lines) as proxy_port,
    ):
        framework = FRAMEWORKS["pydantic-ai-openai"]
        await framework.turn(framework.proxy_url(proxy_port), PROMPTS[0], None, False)
    (session_id,) = sessions_in(tmp_path)
    return upstream, session_id, lines


async def test_an_answer_sent_back_re_serialized_is_logged_and_costs_the_answers_prefix(
    tmp_path: Path,
) -> None:
    upstream, _, lines = await _rewritten_answer(tmp_path)
    assert "client changed messages[2]" in lines[1]  # [0] is the system message
    sent = upstream.received[1]
    assert LONG_ARGUMENTS.encode() not in sent.body.replace(b'\\"', b'"')
    # The same request with the answer as it came reads through the answer.
    verbatim = Emulator(script=[{"tool_calls": [{"name": "add", "arguments": LONG_ARGUMENTS}]}])
    verbatim.push({"text": "3"})
    compact = encode(decode(LONG_ARGUMENTS))
    body = sent.body.replace(encode(compact.decode())[1:-1], encode(LONG_ARGUMENTS)[1:-1])
    assert body != sent.body
    async with httpx.AsyncClient(transport=verbatim.transport(), base_url="http://e") as client:
        await client.post("/deepseek/chat/completions", content=upstream.received[0].body)
        await client.post("/deepseek/chat/completions", content=body)
    assert sent.usage is not None
    assert verbatim.received[1].usage is not None
    lost = (
        verbatim.received[1].usage["prompt_cache_hit_tokens"]
        - sent.usage["prompt_cache_hit_tokens"]
    )
    assert lost >= 128, lost


async def test_the_cache_audit_names_an_answer_sent_back_re_serialized(tmp_path: Path) -> None:
    _, session_id, _ = await _rewritten_answer(tmp_path)
    cache = cli_json("cache", session_id, "--store", str(tmp_path))
    causes = {c["kind"]: c for c in cache["requests"][1]["causes"]}
    # the answer the client was shown came back with its arguments re-serialized
    assert causes["client-edit"]["detail"]["what"] == "arguments-reserialized"
