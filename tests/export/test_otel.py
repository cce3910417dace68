"""``tapelog export otel``: spans on the wire, checked against the log they came from.

The session is a real agent run on the in-process emulator (tool calls, a tool
that fails, a retried 500, a turn whose retries run out, cached tokens). The
command runs as a subprocess, as a user runs it, and sends to a real OTLP/HTTP
receiver (``_receiver``); the tests decode the protobuf bodies that arrived
and compare every span with the events: names, parentage, times (the log's
``time``), GenAI attributes and the cache audit. The expectations are derived
from the log here, independently of tapelog.export.
"""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from agent._harness import LONG_SYSTEM, add, agent_on
from store.test_cli_postgres import url_of
from store.test_postgres import drop_schema, pg_conninfo, schema_for
from tapelog.agent import tool
from tapelog.audit import cache_report
from tapelog.emulator import Emulator
from tapelog.export import otel_spans, send_otlp
from tapelog.log import decode, register_secret
from tapelog.log._api import Event, Session
from tapelog.log._redact import forget_secrets
from tapelog.store import JsonlStore, PostgresStore, SessionWriter

from ._receiver import Receiver, otlp_receiver

__all__ = ["pg_conninfo"]  # the PostgreSQL fixture of tests/store, shared

TAPELOG = str(Path(sys.executable).with_name("tapelog"))
PAGE_SECRET = "tok-EXPORT-secret-0042-zz"
"""A secret a tool reads: in the log (nobody had registered it when the agent
ran), and registered by the export process (as a provider key), so only
``--content`` could leak it and redaction must stop it there."""
SID = "otel-1"
MODEL = "deepseek-chat"
CONTENT_KEYS = {
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.tool.definitions",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
}


@tool
def fetch(url: str) -> str:
    """Fetch a web page."""
    if "bad" in url:
        raise ValueError("host unreachable")
    return f"page says {PAGE_SECRET}"


SCRIPT: list[dict[str, Any]] = [
    {
        "tool_calls": [
            {"name": "add", "arguments": '{"a": 2, "b": 3}'},
            {"name": "fetch", "arguments": '{"url": "http://bad.example"}'},
        ]
    },
    {"error": {"status": 500, "message": "upstream hiccup"}},  # retried: same request again
    {"text": "2 + 3 = 5; the fetch failed."},
    {"tool_calls": [{"name": "fetch", "arguments": '{"url": "http://good.example"}'}]},
    {"text": "The page holds a token."},
    *[{"error": {"status": 500, "message": "down"}}] * 4,  # every retry fails: turn error
]


async def run_agent(session: Session, writer: SessionWriter) -> None:
    emulator = Emulator(script=SCRIPT)
    config = {"temperature": 0.2, "max_tokens": 300}
    async with agent_on(
        emulator,
        session=session,
        tools=[add, fetch],
        system=LONG_SYSTEM,
        config=config,
        writer=writer,
    ) as agent:
        results = [
            await agent.run("Add 2 and 3, and fetch http://bad.example."),
            await agent.run("Fetch http://good.example."),
            await agent.run("Once more."),
        ]
    assert [r.reason["kind"] for r in results] == ["completed", "completed", "error"]


@pytest.fixture
async def stored(tmp_path: Path) -> tuple[Path, Session]:
    """The session in a JSONL store, and the session as the store gives it back."""
    store = JsonlStore(tmp_path / "store")
    session = Session(SID)
    with store.create(session) as writer:
        await run_agent(session, writer)
    assert PAGE_SECRET.encode() in store.session_bytes(SID)  # the log holds it as is
    return tmp_path / "store", store.load(SID).session


def tapelog(tmp_path: Path, *args: str, key: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run the command line; ``key`` is set as a provider key: a secret of that process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TAPELOG_", "OTEL_"))}
    env.pop("OPENAI_API_KEY", None)
    config_home = tmp_path / "config-home"
    config_home.mkdir(exist_ok=True)
    env["XDG_CONFIG_HOME"] = str(config_home)  # no providers file
    if key is not None:
        env["OPENAI_API_KEY"] = key
    return subprocess.run(
        [TAPELOG, *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def export(
    tmp_path: Path, receiver: Receiver, store: str, *more: str, key: str | None = None
) -> list[Span]:
    before = len(receiver.requests)
    args = ["export", "otel", SID, "--endpoint", receiver.url, "--store", store, *more]
    done = tapelog(tmp_path, *args, key=key)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert done.stdout.startswith("exported 12 span(s): 3 turn(s), 5 model call(s), 3 tool call(s)")
    assert done.stdout.endswith(f" to {receiver.url}/v1/traces\n")
    sent = receiver.requests[before:]
    assert sent
    assert all(r.content_type == "application/x-protobuf" for r in sent)
    spans: list[Span] = []
    for request in sent:
        spans.extend(Receiver(url="", requests=[request]).spans())
    return spans


# --- reading the spans ---------------------------------------------------------


def value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return tuple(value(v) for v in any_value.array_value.values)
    return getattr(any_value, kind)


def attrs(span: Span) -> dict[str, Any]:
    return {a.key: value(a.value) for a in span.attributes}


def expected_trace_id(session_id: str) -> bytes:
    """docs/otel.md, "Ids"."""
    return hashlib.sha256(f"tapelog-otel-trace\0{session_id}".encode()).digest()[:16]


def expected_span_id(session_id: str, key: str | int) -> bytes:
    return hashlib.sha256(f"tapelog-otel-span\0{session_id}\0{key}".encode()).digest()[:8]


def ns(event: Event) -> int:
    return event.time * 1_000_000


def step_events(events: Sequence[Event], start: Event) -> Iterator[Event]:
    """The events of the step opened by ``start``, up to its ``step/end``."""
    for event in events[start.seq + 1 :]:
        yield event
        if event.type == "step/end":
            return


FINISH = {"stop": "stop", "tool_calls": "tool_call", "max_tokens": "length", "error": "error"}


def check_against_log(spans: list[Span], session: Session, *, cache: bool = True) -> None:
    """Every span matches the event it came from.

    ``cache``: also compare the cache audit with this process's. (Not when the
    exporting process had a secret registered that the log holds: loading
    redacts it there, so its rebuilt requests, and the token estimates the
    audit scales by, differ from the ones sent.)
    """
    events = session.events
    trace = expected_trace_id(session.id)
    assert {s.trace_id for s in spans} == {trace}
    assert len({s.span_id for s in spans}) == len(spans)
    (root,) = [s for s in spans if not s.parent_span_id]
    assert root.name == "tapelog.session"
    assert root.span_id == expected_span_id(session.id, "session")
    assert root.start_time_unix_nano == min(ns(e) for e in events)
    assert root.end_time_unix_nano == max(ns(e) for e in events)
    assert attrs(root)["gen_ai.conversation.id"] == session.id
    by_seq = {attrs(s)["tapelog.seq"]: s for s in spans if s is not root}
    assert len(by_seq) == len(spans) - 1
    for span in spans:
        if span is not root:
            assert span.span_id == expected_span_id(session.id, attrs(span)["tapelog.seq"])

    report = {row.seq: row for row in cache_report(session).requests}
    turn_span: dict[int, Span] = {}
    step_span: dict[tuple[int, int], Span] = {}
    counts = {"turn": 0, "chat": 0, "tool": 0}
    for event in events:
        if event.type == "turn/start":
            span = by_seq[event.seq]
            end = next(e for e in events[event.seq :] if e.type == "turn/end")
            a = attrs(span)
            assert span.name == "invoke_agent"
            assert span.kind == Span.SPAN_KIND_INTERNAL
            assert span.parent_span_id == root.span_id
            assert (span.start_time_unix_nano, span.end_time_unix_nano) == (ns(event), ns(end))
            assert a["gen_ai.operation.name"] == "invoke_agent"
            assert a["tapelog.turn"] == event.data["turn"]
            assert a["tapelog.end_seq"] == end.seq
            assert a["tapelog.turn.end_reason"] == end.data["reason"]["kind"]
            turn_span[event.data["turn"]] = span
            counts["turn"] += 1
        elif event.type == "step/start":
            span = by_seq[event.seq]
            own = list(step_events(events, event))
            (message,) = [e for e in own if e.type == "assistant/message"]
            a = attrs(span)
            assert span.name == f"chat {MODEL}"
            assert span.kind == Span.SPAN_KIND_CLIENT
            assert span.parent_span_id == turn_span[event.data["turn"]].span_id
            assert span.start_time_unix_nano == ns(event)
            assert span.end_time_unix_nano == ns(message)  # the model call ends with its answer
            assert a["gen_ai.operation.name"] == "chat"
            assert a["gen_ai.provider.name"] == a["gen_ai.system"] == "deepseek"
            assert a["gen_ai.request.model"] == MODEL
            assert a["gen_ai.request.temperature"] == 0.2
            assert a["gen_ai.request.max_tokens"] == 300
            assert a["gen_ai.conversation.id"] == session.id
            assert (a["tapelog.turn"], a["tapelog.step"]) == (
                event.data["turn"],
                event.data["step"],
            )
            assert a["tapelog.message_seq"] == message.seq
            assert a["tapelog.end_seq"] == own[-1].seq
            usage = message.data.get("usage")
            if usage:
                assert a["gen_ai.response.model"] == message.data["source"]["model"]
                assert a["gen_ai.usage.input_tokens"] == (
                    usage["input"] + usage["cache_read"] + usage["cache_write"]
                )
                assert a["gen_ai.usage.output_tokens"] == usage["output"]
                assert a["gen_ai.usage.cache_read.input_tokens"] == usage["cache_read"]
                assert a["gen_ai.usage.cache_creation.input_tokens"] == usage["cache_write"]
                finish = [e.data["chunk"] for e in own if e.type == "assistant/chunk"]
                reason = [c["reason"] for c in finish if c["kind"] == "finish"][-1]
                assert a["gen_ai.response.finish_reasons"] == (FINISH[reason],)
            else:
                assert "gen_ai.usage.input_tokens" not in a
                assert "gen_ai.response.finish_reasons" not in a
            row = report[event.seq]
            assert a["tapelog.request.index"] == row.index
            assert a["tapelog.cache.reported_tokens"] == row.cached_reported
            if cache:
                assert a["tapelog.cache.expected_tokens"] == row.cached_expected
                assert a["tapelog.cache.drop"] == row.drop
            failed = [
                e for e in own if e.type == "assistant/chunk" and e.data["chunk"]["kind"] == "error"
            ]
            assert [(ev.name, ev.time_unix_nano) for ev in span.events] == [
                ("tapelog.attempt_failed", ns(e)) for e in failed
            ]
            for ev, chunk in zip(span.events, failed, strict=True):
                ev_attrs = {x.key: value(x.value) for x in ev.attributes}
                assert ev_attrs["http.response.status_code"] == chunk.data["chunk"]["status"]
                assert ev_attrs["tapelog.attempt"] == chunk.data["chunk"]["attempt"]
            step_span[event.data["turn"], event.data["step"]] = span
            counts["chat"] += 1
        elif event.type == "tool/call":
            span = by_seq[event.seq]
            result = next(
                e
                for e in events[event.seq :]
                if e.type == "tool/result" and e.data["call_id"] == event.data["call_id"]
            )
            a = attrs(span)
            assert span.name == f"execute_tool {event.data['name']}"
            assert span.parent_span_id == step_span[event.data["turn"], event.data["step"]].span_id
            assert (span.start_time_unix_nano, span.end_time_unix_nano) == (ns(event), ns(result))
            assert a["gen_ai.operation.name"] == "execute_tool"
            assert a["gen_ai.tool.name"] == event.data["name"]
            assert a["gen_ai.tool.call.id"] == event.data["call_id"]
            assert a["tapelog.end_seq"] == result.seq
            error = result.data["is_error"]
            assert span.status.code == (
                Status.STATUS_CODE_ERROR if error else Status.STATUS_CODE_UNSET
            )
            counts["tool"] += 1
    assert len(spans) == 1 + sum(counts.values())


def spans_named(spans: list[Span], name: str) -> list[Span]:
    return sorted((s for s in spans if s.name == name), key=lambda s: s.start_time_unix_nano)


def check_outcomes(spans: list[Span], session: Session) -> None:
    """What the scripted run did: a failing tool, a retry, a turn that failed, cache hits."""
    tools = spans_named(spans, "execute_tool fetch")
    assert [s.status.code for s in tools] == [Status.STATUS_CODE_ERROR, Status.STATUS_CODE_UNSET]
    assert attrs(tools[0])["error.type"] == "ValueError"
    assert tools[0].status.message == "ValueError"  # the type only: no text without --content
    chats = spans_named(spans, f"chat {MODEL}")
    assert [len(c.events) for c in chats] == [0, 1, 0, 0, 3]
    assert [c.status.code for c in chats[:4]] == [Status.STATUS_CODE_UNSET] * 4
    assert chats[4].status.code == Status.STATUS_CODE_ERROR
    assert attrs(chats[4])["error.type"] == "ProviderError"
    assert chats[4].status.message == "ProviderError"
    turns = spans_named(spans, "invoke_agent")
    assert [t.status.code for t in turns] == [Status.STATUS_CODE_UNSET] * 2 + [
        Status.STATUS_CODE_ERROR
    ]
    assert attrs(turns[2])["error.type"] == "ProviderError"
    cached = [attrs(c).get("gen_ai.usage.cache_read.input_tokens", 0) for c in chats]
    assert cached[0] == 0
    assert all(n > 0 for n in cached[1:4])  # the long system prompt stays cached
    root = spans_named(spans, "tapelog.session")[0]
    totals = cache_report(session).totals
    assert attrs(root)["tapelog.cache.reported_tokens"] == totals.cached_reported == sum(cached)
    assert attrs(root)["tapelog.requests"] == 5


# --- the tests -----------------------------------------------------------------


async def test_spans_on_the_wire_match_the_log(
    stored: tuple[Path, Session], tmp_path: Path
) -> None:
    store, session = stored
    with otlp_receiver() as receiver:
        spans = export(tmp_path, receiver, str(store))
        (resource,) = receiver.resources()
        assert resource["service.name"] == "tapelog"
        bodies = b"".join(r.body for r in receiver.requests)
    check_against_log(spans, session)
    check_outcomes(spans, session)
    # No content by default: no message attribute, and no text of the log on the wire.
    assert not [k for s in spans for k in attrs(s) if k in CONTENT_KEYS]
    for text in ("Fetch http://good.example", "2 + 3 = 5", "Rule 0:", "page says", "unreachable"):
        assert text.encode() not in bodies
    assert b"upstream hiccup" not in bodies  # provider error text is content too


async def test_re_exporting_gives_the_same_ids_and_the_file_holds_the_same_spans(
    stored: tuple[Path, Session], tmp_path: Path
) -> None:
    store, _ = stored

    def identity(spans: list[Span]) -> set[tuple[bytes, bytes, bytes, str, int, int]]:
        return {
            (
                s.trace_id,
                s.span_id,
                s.parent_span_id,
                s.name,
                s.start_time_unix_nano,
                s.end_time_unix_nano,
            )
            for s in spans
        }

    with otlp_receiver() as receiver:
        first = identity(export(tmp_path, receiver, str(store)))
        second = identity(export(tmp_path, receiver, str(store)))
    assert first == second
    assert len(first) == 12

    out = tmp_path / "trace.jsonl"
    done = tapelog(tmp_path, "export", "otel", SID, "--file", str(out), "--store", str(store))
    assert done.returncode == 0, done.stderr
    trace_hex = expected_trace_id(SID).hex()
    assert done.stdout == (
        f"wrote {out} (12 span(s): 3 turn(s), 5 model call(s), 3 tool call(s); trace {trace_hex})\n"
    )
    # OTLP JSON: one ExportTraceServiceRequest per line, ids in hex, enums as integers.
    lines = out.read_bytes().splitlines()
    file_spans = [
        span
        for line in lines
        for rs in decode(line)["resourceSpans"]
        for ss in rs["scopeSpans"]
        for span in ss["spans"]
    ]
    assert {
        (
            bytes.fromhex(s["traceId"]),
            bytes.fromhex(s["spanId"]),
            bytes.fromhex(s.get("parentSpanId", "")),
            s["name"],
            int(s["startTimeUnixNano"]),
            int(s["endTimeUnixNano"]),
        )
        for s in file_spans
    } == first
    chat = next(s for s in file_spans if s["name"] == f"chat {MODEL}")
    assert chat["kind"] == 3  # SPAN_KIND_CLIENT

    to_stdout = tapelog(tmp_path, "export", "otel", SID, "--file", "-", "--store", str(store))
    assert to_stdout.returncode == 0, to_stdout.stderr
    assert to_stdout.stdout.encode() == out.read_bytes()
    assert to_stdout.stderr.startswith("exported 12 span(s)")


async def test_content_is_opt_in_and_redacts_registered_secrets(
    stored: tuple[Path, Session], tmp_path: Path
) -> None:
    store, session = stored
    with otlp_receiver() as receiver:
        spans = export(tmp_path, receiver, str(store), "--content", key=PAGE_SECRET)
        bodies = b"".join(r.body for r in receiver.requests)
    check_against_log(spans, session, cache=False)
    assert PAGE_SECRET.encode() not in bodies
    good = spans_named(spans, "execute_tool fetch")[1]
    assert attrs(good)["gen_ai.tool.call.arguments"] == '{"url": "http://good.example"}'
    assert attrs(good)["gen_ai.tool.call.result"] == "page says ***"
    bad = spans_named(spans, "execute_tool fetch")[0]
    assert bad.status.message == "ValueError: host unreachable"
    chats = spans_named(spans, f"chat {MODEL}")
    last_answered = attrs(chats[3])
    assert decode(last_answered["gen_ai.system_instructions"]) == [
        {"type": "text", "content": LONG_SYSTEM}
    ]
    messages = decode(last_answered["gen_ai.input.messages"])
    assert messages[0] == {
        "role": "user",
        "parts": [{"type": "text", "content": "Add 2 and 3, and fetch http://bad.example."}],
    }
    assert messages[-1] == {
        "role": "tool",
        "parts": [
            {
                "type": "tool_call_response",
                "id": attrs(good)["gen_ai.tool.call.id"],
                "response": "page says ***",
            }
        ],
    }
    assert decode(last_answered["gen_ai.output.messages"]) == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "The page holds a token."}],
            "finish_reason": "stop",
        }
    ]
    assert [t["name"] for t in decode(last_answered["gen_ai.tool.definitions"])] == ["add", "fetch"]
    retried = chats[1]
    (attempt,) = retried.events
    note = {x.key: value(x.value) for x in attempt.attributes}
    assert "upstream hiccup" in note["tapelog.message"]


async def test_content_redacts_secrets_registered_after_the_session_was_loaded(
    stored: tuple[Path, Session],
) -> None:
    _, session = stored  # loaded before anyone registered the secret: the log holds it
    tools = [s for s in otel_spans(session, content=True).spans if s.name == "execute_tool fetch"]
    assert tools[1].attributes["gen_ai.tool.call.result"] == f"page says {PAGE_SECRET}"
    register_secret(PAGE_SECRET)
    try:
        trace = otel_spans(session, content=True)
    finally:
        forget_secrets()
    texts = [str(v) for s in trace.spans for v in s.attributes.values()]
    assert not [t for t in texts if PAGE_SECRET in t]
    tools = [s for s in trace.spans if s.name == "execute_tool fetch"]
    assert tools[1].attributes["gen_ai.tool.call.result"] == "page says ***"
    inputs = [
        s.attributes["gen_ai.input.messages"] for s in trace.spans if s.name.startswith("chat")
    ]
    assert '"response":"page says ***"' in str(inputs[-1])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def test_an_export_that_fails_is_one_readable_line(
    stored: tuple[Path, Session], tmp_path: Path
) -> None:
    store = str(stored[0])
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    refused = tapelog(
        tmp_path, "export", "otel", SID, "--endpoint", endpoint, "--timeout", "1", "--store", store
    )
    assert refused.returncode == 2
    assert refused.stdout == ""
    assert refused.stderr == (
        f"error: could not export the spans to http://127.0.0.1:{port}/v1/traces: "
        "Connection refused; check that an OTLP/HTTP receiver listens there\n"
    )
    with otlp_receiver() as receiver:
        receiver.status = 400
        bad = tapelog(tmp_path, "export", "otel", SID, "--endpoint", receiver.url, "--store", store)
    assert bad.returncode == 2
    assert bad.stderr == (
        f"error: could not export the spans to {receiver.url}/v1/traces: the receiver "
        "answered HTTP 400 Bad Request; check that an OTLP/HTTP receiver listens there\n"
    )
    not_http = tapelog(tmp_path, "export", "otel", SID, "--endpoint", "ftp://x", "--store", store)
    assert not_http.returncode == 2
    assert not_http.stderr == (
        "error: the OTLP endpoint 'ftp://x' is not an http:// or https:// URL; "
        "give one like http://127.0.0.1:4318\n"
    )
    nowhere = tapelog(tmp_path, "export", "otel", SID, "--store", store)
    assert nowhere.returncode == 2
    assert nowhere.stderr.startswith("error: nowhere to export to: give --endpoint URL")
    assert nowhere.stderr.count("\n") == 1


def test_without_the_extra_the_command_says_how_to_install_it(tmp_path: Path) -> None:
    blocked = (
        "import sys; sys.modules['opentelemetry'] = None; "  # as if not installed
        "from tapelog.cli import main; main(['export', 'otel', 'x', '--file', '-'])"
    )
    done = subprocess.run(
        [sys.executable, "-c", blocked], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 2
    assert done.stderr == (
        "error: OpenTelemetry export needs the optional OpenTelemetry packages; "
        "install them with: pip install 'tapelog[otel]'\n"
    )


def test_importing_tapelog_and_its_cli_loads_no_opentelemetry() -> None:
    code = (
        "import sys, tapelog, tapelog.cli, tapelog.export; "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] == 'opentelemetry'); "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_the_gen_ai_names_are_those_of_the_installed_semantic_conventions() -> None:
    from opentelemetry.semconv._incubating.attributes import gen_ai_attributes

    from tapelog.export import _semconv

    ours = {n: v for n, v in vars(_semconv).items() if n.startswith("GEN_AI_")}
    assert "GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS" in ours
    assert {n: getattr(gen_ai_attributes, n, None) for n in ours} == ours
    values = gen_ai_attributes.GenAiOperationNameValues
    assert (
        values.CHAT.value,
        values.INVOKE_AGENT.value,
        values.EXECUTE_TOOL.value,
    ) == (_semconv.OP_CHAT, _semconv.OP_INVOKE_AGENT, _semconv.OP_EXECUTE_TOOL)


# --- PostgreSQL ----------------------------------------------------------------


@pytest.fixture
def pg(pg_conninfo: str, tmp_path: Path) -> Iterator[tuple[str, PostgresStore]]:
    """A store URL (a schema of its own, a password the server ignores) and that store."""
    schema = schema_for(tmp_path)
    yield (
        url_of(pg_conninfo, schema, password="pg-pass-never-shown"),
        PostgresStore(pg_conninfo, schema=schema),
    )
    drop_schema(pg_conninfo, schema)


async def test_a_session_in_postgresql_exports_the_same_way(
    pg: tuple[str, PostgresStore], tmp_path: Path
) -> None:
    url, store = pg
    session = Session(SID)
    with store.create(session) as writer:
        await run_agent(session, writer)
    loaded = store.load(SID).session
    with otlp_receiver() as receiver:
        spans = export(tmp_path, receiver, url)
    check_against_log(spans, loaded)
    check_outcomes(spans, loaded)


async def test_a_fork_links_to_its_parent_sessions_root(
    stored: tuple[Path, Session], tmp_path: Path
) -> None:
    store_dir, session = stored
    end_of_first_turn = next(e.seq for e in session.events if e.type == "turn/end")
    at = str(end_of_first_turn)
    store = str(store_dir)
    forked = tapelog(tmp_path, "fork", SID, "--at", at, "--id", "otel-fork", "--store", store)
    assert forked.returncode == 0, forked.stderr
    with otlp_receiver() as receiver:
        args = ["export", "otel", "otel-fork", "--endpoint", receiver.url, "--store", store]
        done = tapelog(tmp_path, *args)
        assert done.returncode == 0, done.stderr
        spans = receiver.spans()
    (root,) = [s for s in spans if not s.parent_span_id]
    assert root.trace_id == expected_trace_id("otel-fork")
    assert [(link.trace_id, link.span_id) for link in root.links] == [
        (expected_trace_id(SID), expected_span_id(SID, "session"))
    ]
    assert attrs(root)["tapelog.session.parent"] == SID
    check_against_log(spans, JsonlStore(store_dir).load("otel-fork").session)


def test_a_long_session_goes_in_several_requests_and_every_span_arrives() -> None:
    session = Session("long")
    header = {"config": {"provider": "openai", "model": "gpt-4.1-mini"}}
    usage = {"input": 10, "cache_read": 0, "cache_write": 0, "output": 1, "reasoning": 0}
    source = {"provider": "openai", "model": "gpt-4.1-mini"}
    for turn in range(1, 301):
        session.append("turn/start", {"turn": turn})
        text = [{"type": "text", "text": f"question {turn}"}]
        session.append(
            "user/message", {"content": text, "source": {"kind": "user"}}, surface_op="append"
        )
        session.append("step/start", {"turn": turn, "step": 1})
        if turn == 1:
            session.append("request/header", {"header": header, "reason": "initial"})
        answer = {"turn": turn, "step": 1, "content": text, "source": source, "usage": usage}
        session.append("assistant/message", answer, surface_op="append")
        session.append("step/end", {"turn": turn, "step": 1})
        session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    trace = otel_spans(session)
    assert len(trace.spans) == 601
    with otlp_receiver() as receiver:
        assert send_otlp(trace, f"{receiver.url}/v1/traces") == 601
        spans = receiver.spans()
    assert len(receiver.requests) == 2  # at most 512 spans per request

    def parent(span_id: int | None) -> bytes:
        return b"" if span_id is None else span_id.to_bytes(8, "big")

    assert sorted(
        (s.span_id, s.parent_span_id, s.name, s.start_time_unix_nano) for s in spans
    ) == sorted(
        (s.span_id.to_bytes(8, "big"), parent(s.parent_id), s.name, s.start_ns) for s in trace.spans
    )
