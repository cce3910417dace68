"""Known secrets never reach the log, a terminal or a report, in any form.

An API key a provider echoes in an in-stream error frame used to be logged and
printed in clear (issue 8, item 6): the HTTP error bodies were redacted, the
stream errors were not, and JSON-escaped, split or base64 forms got through
everywhere. Now every key the clients read (and every store password) is a
registered secret, and ``freeze``, which every logged string passes through,
redacts it in each of its forms. The PostgreSQL store hides every secret
parameter of its connection string, not only ``password`` (item 7).
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from tapelog import ProviderError, StoreError
from tapelog.agent import Agent
from tapelog.llm import LlmRequest
from tapelog.llm._api import AbortHandle, OpenAIWire
from tapelog.llm._clients import AnthropicClient, OpenAIClient
from tapelog.log import decode, redact, register_secret
from tapelog.log._api import EpochHeader, LlmCallConfig, Session, freeze
from tapelog.log._redact import forget_secrets
from tapelog.store import PostgresStore

TAPELOG = str(Path(sys.executable).with_name("tapelog"))

# Unique to this file: the pytest process never registers it (the key-echo
# test runs the emulator and the CLI in processes of their own).
KEY = "sk-proj-Echo9/Zx+7Lm-4f9d0c2b1a5e"


@pytest.fixture(autouse=True)
def _no_secrets_left() -> Iterator[None]:
    """Each test starts and ends with an empty registry (other tests register
    their keys again when their clients read them)."""
    forget_secrets()
    yield
    forget_secrets()


def _slash_escaped(secret: str) -> str:
    return secret.replace("/", "\\/")


def _unicode_escaped(secret: str) -> str:
    """Every third character as ``\\uXXXX`` (upper-case hex), the rest as it is."""
    return "".join(f"\\u{ord(c):04X}" if i % 3 == 1 else c for i, c in enumerate(secret))


def _in_base64(secret: str, *, urlsafe: bool = False, lead: bytes = b"blob:") -> str:
    data = lead + secret.encode() + b":tail"
    return (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(data).decode()


def _forms(secret: str) -> dict[str, str]:
    """The key as a provider, a tool or a model may echo it."""
    return {
        "raw": secret,
        "json-escaped /": _slash_escaped(secret),
        "unicode-escaped": _unicode_escaped(secret),
        "json-string": orjson.dumps(secret).decode()[1:-1],
        "url-encoded": urllib.parse.quote(secret, safe=""),
        "url-encoded, / kept": urllib.parse.quote(secret),
    }


# --- the registry and its forms ----------------------------------------------


@pytest.mark.parametrize("form", sorted(_forms(KEY)))
def test_every_escaped_form_of_a_registered_key_is_redacted(form: str) -> None:
    text = f"before {_forms(KEY)[form]} after"
    assert redact(text) == text  # nothing registered yet
    register_secret(KEY)
    assert redact(text) == "before *** after"


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_nested_json_escapes_are_redacted(depth: int) -> None:
    register_secret(KEY)
    text: Any = {"message": KEY}
    for _ in range(depth):
        text = orjson.dumps(text).decode()
    assert KEY not in redact(text)
    assert "***" in redact(text)
    assert _slash_escaped(KEY) not in redact(text.replace("/", "\\/"))


@pytest.mark.parametrize("urlsafe", [False, True])
@pytest.mark.parametrize("lead", [b"", b"a", b"ab", b"abc", b"abcd", b"abcde"])
def test_a_key_inside_a_larger_base64_blob_is_found_at_every_alignment(
    urlsafe: bool, lead: bytes
) -> None:
    blob = _in_base64(KEY, urlsafe=urlsafe, lead=lead)
    register_secret(KEY)
    redacted = redact(f"data: {blob}")
    assert "***" in redacted
    # what is left of the blob decodes to no part of the key longer than 2 bytes
    for piece in redacted.removeprefix("data: ").split("***"):
        padded = piece + "=" * (-len(piece) % 4)
        decoded = (base64.urlsafe_b64decode if urlsafe else base64.b64decode)(
            padded[: len(padded) // 4 * 4]
        )
        assert not any(KEY.encode()[i : i + 3] in decoded for i in range(len(KEY) - 2))


def test_short_values_are_never_registered_and_nothing_registered_costs_nothing() -> None:
    text = "a plain text with sk-1234 in it"
    assert register_secret("sk-1234") is False  # 7 characters: too short to be told apart
    assert register_secret(None) is False
    assert redact(text) is text
    assert freeze({"t": text})["t"] is text


def test_freeze_is_the_choke_point_of_the_log() -> None:
    register_secret(KEY)
    session = Session()
    event = session.append(
        "context/message",
        {
            "content": [{"type": "text", "text": f"see {KEY} and {_unicode_escaped(KEY)}"}],
            "source": {"kind": "hook", "name": f"leak {_in_base64(KEY)}"},
        },
        surface_op="append",
    )
    line = event.encode().decode()
    assert line.count("***") == 3
    for form in (*_forms(KEY).values(), _in_base64(KEY)):
        assert form not in line
    # keys of a JSON object are structure, never redacted (issue 15, item 10)
    assert freeze({KEY: KEY}) == {KEY: "***"}


# --- the stream parsers and the clients ----------------------------------------

SSE = {"content-type": "text/event-stream"}


def make_request() -> LlmRequest:
    header = EpochHeader(config=LlmCallConfig(provider="openai", model="m"), system="Be brief.")
    hello = {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    return LlmRequest(header=header, messages=freeze([hello]), node_seqs=(0,))


def _openai_frame(delta: dict[str, Any] | None = None, **extra: Any) -> bytes:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": None}]
    return b"data: " + orjson.dumps({"choices": choices, **extra}) + b"\n\n"


def _anthropic_frame(name: str, data: dict[str, Any]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps({"type": name, **data}) + b"\n\n"


def _echo() -> str:
    forms = _forms(KEY)
    return (
        f"Incorrect API key provided: {KEY}. As JSON: {forms['json-escaped /']} "
        f"{forms['unicode-escaped']}. Blob: {_in_base64(KEY)}."
    )


def _client(wire: str, content: bytes) -> OpenAIClient | AnthropicClient:
    http = httpx.AsyncClient(
        transport=httpx.MockTransport(lambda _: httpx.Response(200, headers=SSE, content=content))
    )
    if wire == "openai":
        return OpenAIClient(
            http_client=http,
            base_url="https://api.example.com/v1",
            wire=OpenAIWire(dialect="openai"),
            env={"OPENAI_API_KEY": KEY},
        )
    return AnthropicClient(http_client=http, env={"ANTHROPIC_API_KEY": KEY})


ERROR_STREAMS = {
    "openai": _openai_frame({"role": "assistant", "content": "Hel"})
    + b"data: "
    + orjson.dumps({"error": {"message": _echo(), "type": "invalid_request_error"}})
    + b"\n\n",
    "anthropic": _anthropic_frame("message_start", {"message": {"usage": {"input_tokens": 3}}})
    + _anthropic_frame(
        "error", {"error": {"type": f"invalid_request_error {KEY}", "message": _echo()}}
    ),
}


@pytest.mark.parametrize("wire", sorted(ERROR_STREAMS))
async def test_a_key_echoed_in_a_stream_error_frame_is_redacted_from_the_error(wire: str) -> None:
    client = _client(wire, ERROR_STREAMS[wire])
    with pytest.raises(ProviderError) as info:
        async for _ in client.stream(make_request(), abort=AbortHandle()):
            pass
    for text in (str(info.value), info.value.body or ""):
        assert "***" in text
        for form in (*_forms(KEY).values(), _in_base64(KEY)):
            assert form not in text


def _split_text_stream(pieces: list[str]) -> bytes:
    frames = [_openai_frame({"content": p}) for p in pieces]
    frames.append(_openai_frame({}, choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}]))
    return b"".join(frames) + b"data: [DONE]\n\n"


@pytest.mark.parametrize(
    "pieces",
    [
        ["Your key is " + KEY[:9], KEY[9:] + ", keep it safe."],
        ["Your key is s", KEY[1:] + " ok"],
        ["Your key is sk", KEY[2:12], KEY[12:] + " ok"],
        ["Your key is sk-p", KEY[4:6], KEY[6:20], KEY[20:]],
        ["Your key is " + KEY[:-1], KEY[-1:]],
    ],
    ids=["halves", "after-1", "three-pieces", "four-pieces", "last-char"],
)
async def test_a_key_split_across_stream_frames_is_never_logged(pieces: list[str]) -> None:
    assert "".join(pieces).count(KEY) == 1
    client = _client("openai", _split_text_stream(pieces))
    config = LlmCallConfig(provider="openai", model="gpt-4.1-mini")
    session = Session()
    result = await Agent(session, client, config=config).run("What is my key?")
    assert result.reason["kind"] == "completed"
    log = "".join(e.encode().decode() for e in session.events)
    assert KEY not in log
    texts = [
        e.data["chunk"]["text"]
        for e in session.events
        if e.type == "assistant/chunk" and e.data["chunk"]["kind"] == "text"
    ]
    joined = "".join(texts)
    assert KEY not in joined  # the chunks, read one after the other, do not spell it
    assert joined == result.text
    assert result.text.startswith("Your key is ")
    assert "***" in result.text
    # no chunk holds more than three characters of the key's start or its end
    for text in texts:
        assert not any(KEY[:n] in text for n in range(4, len(KEY)))
        assert not any(KEY[-n:] in text for n in range(4, len(KEY)))


async def test_a_key_split_across_tool_call_fragments_is_never_logged() -> None:
    arguments = orjson.dumps({"path": KEY}).decode()
    cut = arguments.index(KEY) + 10
    frames = [
        _anthropic_frame("message_start", {"message": {"usage": {"input_tokens": 3}}}),
        _anthropic_frame(
            "content_block_start",
            {
                "index": 0,
                "content_block": {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {}},
            },
        ),
        *(
            _anthropic_frame(
                "content_block_delta",
                {"index": 0, "delta": {"type": "input_json_delta", "partial_json": part}},
            )
            for part in (arguments[:cut], arguments[cut:])
        ),
        _anthropic_frame("content_block_stop", {"index": 0}),
        _anthropic_frame(
            "message_delta", {"delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 5}}
        ),
        _anthropic_frame("message_stop", {}),
    ]
    client = _client("anthropic", b"".join(frames))
    chunks = [c async for c in client.stream(make_request(), abort=AbortHandle())]
    pieces = [c["arguments"] for c in chunks if c["kind"] == "tool_call"]
    assert "".join(pieces) == '{"path":"***"}'
    assert chunks[0]["id"] == "toolu_1"
    assert chunks[0]["name"] == "read"
    assert chunks[-1]["kind"] == "finish"


# --- the PostgreSQL store's connection string (item 7) ---------------------------

SSL_SECRET = "ssl-Passphrase-77x"


@pytest.mark.parametrize(
    "conninfo",
    [
        f"host={{dir}} port=5 user=u password=hunter2 sslpassword={SSL_SECRET} dbname=d",
        f"postgresql://u:hunter2@/d?host={{dir}}&port=5&sslpassword={SSL_SECRET}",
        f"postgresql://u@/d?host={{dir}}&port=5&sslpassword={urllib.parse.quote(SSL_SECRET)}"
        "&password=hunter2",
    ],
    ids=["keywords", "url", "url-query"],
)
def test_the_store_never_shows_sslpassword_or_password(tmp_path: Path, conninfo: str) -> None:
    store = PostgresStore(conninfo.format(dir=tmp_path))
    shown = repr(store)
    assert shown == f"PostgresStore('user=u dbname=d host={tmp_path} port=5', schema='tapelog')"
    with pytest.raises(StoreError) as info:
        store.list()  # no server there: the connection fails
    text = str(info.value)
    assert text.startswith("could not connect to the store at 'user=u dbname=d host=")
    for secret in (SSL_SECRET, "hunter2"):
        assert secret not in shown
        assert secret not in text
    # and the secret is redacted from anything logged or printed from now on
    assert redact(f"echo {SSL_SECRET}") == "echo ***"


def test_an_unparsable_store_string_hides_its_sslpassword() -> None:
    with pytest.raises(StoreError) as info:
        PostgresStore(f"postgres://u@[::1/d?sslpassword={SSL_SECRET}")
    assert str(info.value).startswith("invalid PostgreSQL connection string: ")
    assert SSL_SECRET not in str(info.value)
    assert "sslpassword=***" in str(info.value)


# --- end to end: the key echoed by the provider, grepped everywhere (item 6) ------


def _tapelog(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [TAPELOG, *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.fixture
def emulator_process(tmp_path: Path) -> Iterator[Any]:
    """Start ``tapelog emulator --script`` in a process of its own; yields a starter."""
    started: list[subprocess.Popen[str]] = []

    def start(script: list[dict[str, Any]]) -> str:
        path = tmp_path / "script.jsonl"
        path.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in script))
        proc = subprocess.Popen(
            [TAPELOG, "emulator", "--port", "0", "--script", str(path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        started.append(proc)
        assert proc.stdout is not None
        first = proc.stdout.readline().split()
        assert first[0] == "emulator", first
        return first[1].removesuffix("/v1")

    yield start
    for proc in started:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


WIRES = {
    # provider: (path, key variable, model, attempts an in-stream error takes)
    "openai": ("/openai/v1", "OPENAI_API_KEY", "gpt-4.1-mini", 4),  # retried: 4 attempts
    "anthropic": ("/anthropic", "ANTHROPIC_API_KEY", "claude-sonnet-4-5", 1),  # not retryable
}


@pytest.mark.parametrize("provider", sorted(WIRES))
def test_a_key_echoed_by_the_provider_is_nowhere(
    provider: str, tmp_path: Path, emulator_process: Any
) -> None:
    path, variable, model, attempts = WIRES[provider]
    fault = {
        "error": {"status": 400, "message": _echo(), "type": "invalid_request_error"},
        "in_stream": True,
    }
    # the text streams in 24-character frames: the key starts in one and ends in the next
    split_text = "x" * 20 + KEY + " is your key; as base64 " + _in_base64(KEY, urlsafe=True)
    script = [
        *[fault] * attempts,
        {"tool_calls": [{"name": "read_file", "arguments": orjson.dumps({"path": KEY}).decode()}]},
        {"text": split_text},
    ]
    base = emulator_process(script) + path
    store = tmp_path / "store"
    env = {**os.environ, variable: KEY, "TAPELOG_STORE": str(store), "TAPELOG_CHECK": "1"}
    env.pop("TAPELOG_PROVIDER", None)
    common = ["--session", "s", "--provider", provider, "--model", model, "--base-url", base]
    common += ["--workspace", str(tmp_path)]
    failed = _tapelog("run", "hello", *common, env=env)
    assert failed.returncode == 1, failed.stderr
    assert "reported an error" in failed.stderr or "error event" in failed.stderr
    answered = _tapelog("run", "read it", *common, env=env)
    assert answered.returncode == 0, answered.stderr
    assert answered.stdout.startswith("x" * 20 + "*** is your key")
    bodies = tmp_path / "bodies"
    rebuilt = _tapelog("requests", "s", "--out", str(bodies), env=env)
    assert rebuilt.returncode == 0, rebuilt.stderr
    report = tmp_path / "report.html"
    reported = _tapelog("report", "s", "-o", str(report), env=env)
    assert reported.returncode == 0, reported.stderr
    shown = _tapelog("show", "s", "--chunks", env=env)
    assert shown.returncode == 0, shown.stderr

    outputs = {
        "stderr": failed.stderr + answered.stderr + rebuilt.stderr + shown.stderr,
        "stdout": answered.stdout + shown.stdout,
        "log": (store / "s.jsonl").read_text(encoding="utf-8"),
        "report": report.read_text(encoding="utf-8"),
    }
    files = sorted(bodies.iterdir())
    assert len(files) == 3  # the failed turn's request (each attempt sent it), then two steps
    outputs.update({f.name: f.read_text(encoding="utf-8") for f in files})
    forms = {
        **_forms(KEY),
        "base64": _in_base64(KEY),
        "base64 url-safe": _in_base64(KEY, urlsafe=True),
        "html-escaped": KEY.replace("+", "&#43;").replace("/", "&#x2F;"),
    }
    for where, text in outputs.items():
        for name, form in forms.items():
            assert form not in text, f"the key ({name}) is in the {where}"
    # each attempt's error chunk, the turn's end, the tool call and the answer
    assert outputs["log"].count("***") >= attempts + 3
    # the chunks of the split text, read one after the other, do not spell the key
    chunks = [decode(line) for line in outputs["log"].splitlines()[1:]]
    pieces = [
        e["data"]["chunk"].get("text", "")
        for e in chunks
        if e["type"] == "assistant/chunk" and e["data"]["chunk"]["kind"] == "text"
    ]
    assert KEY not in "".join(pieces)


@pytest.mark.parametrize(
    ("provider", "base_url"),
    [("emulator", None), ("openai", "http://e/openai/v1"), ("anthropic", "http://e/anthropic")],
)
def test_a_log_rebuilds_the_same_bytes_whatever_secrets_the_reader_has_registered(
    provider: str, base_url: str | None, tmp_path: Path
) -> None:
    """Redaction guards what enters the log; what is derived from the log (the
    projection, the wire bodies, their encoding) is a pure function of it. A
    reader whose key happens to occur in a log (an auditor, a later process
    with another environment) must rebuild exactly what was sent."""
    from tapelog import JsonlStore, LlmCallConfig, Session, rebuild_requests
    from tapelog.agent import tool
    from tapelog.emulator import Emulator
    from tapelog.llm import encode_request, make_client

    later = "later-registered-value-1234"

    @tool
    def echo(text: str) -> str:
        """Echo.

        Args:
            text: What to echo.
        """
        return f"echo: {text}"

    emulator = Emulator(
        script=[
            {"tool_calls": [{"name": "echo", "arguments": f'{{"text": "{later}"}}'}]},
            {"text": f"it said {later}"},
        ]
    )
    config = LlmCallConfig(provider=provider, model="m-1")
    store, session = JsonlStore(tmp_path), Session()
    env = {"OPENAI_API_KEY": "k" * 12, "ANTHROPIC_API_KEY": "k" * 12}
    with store.create(session) as writer:
        http = httpx.AsyncClient(transport=emulator.transport())
        client = make_client(config, http_client=http, base_url=base_url, env=env)
        agent = Agent(
            session, client, config=config, system=f"sys {later}", tools=[echo], writer=writer
        )
        assert agent.run_sync(f"remember {later}").ok
    sent = [r.body for r in emulator.received]
    assert all(later.encode() in body for body in sent)

    register_secret(later)
    loaded = store.load(session.id).session
    assert [encode_request(r.request) for r in rebuild_requests(loaded)] == sent
    assert [encode_request(r.request) for r in rebuild_requests(session)] == sent
    # ...while a new event that carries it is still redacted on the way in
    event = loaded.append(
        "context/message",
        {"content": [{"type": "text", "text": later}], "source": {"kind": "inject"}},
        surface_op="append",
    )
    assert later not in event.encode().decode()
