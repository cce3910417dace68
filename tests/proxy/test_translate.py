"""Translation is exact: neutral messages -> a wire body -> parsed back == the original.

Any conversation the log can hold, encoded by the wire the proxy forwards
with, reads back into the same header and the same neutral messages, and
passes the proxy's own exactness check. So a client that sends what the log
would send is forwarded byte for byte, on both wires.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tapelog._errors import ProxyError
from tapelog.llm._api import AnthropicWire, OpenAIWire
from tapelog.log import decode, encode
from tapelog.log._api import EpochHeader, FrozenList, LlmCallConfig, freeze
from tapelog.proxy import Upstream
from tapelog.proxy._anthropic_in import parse_anthropic, translate_anthropic
from tapelog.proxy._keys import chain_of, loose_key
from tapelog.proxy._openai_in import parse_openai, translate_openai
from tapelog.proxy._translate import Translator
from tapelog.proxy._types import ALL_RULES
from tapelog.request import LlmRequest

TEXT = st.text(min_size=1, max_size=20).filter(lambda t: t.strip() != "")
SCALAR = st.one_of(st.integers(-(10**6), 10**6), st.text(max_size=8), st.booleans(), st.none())
ARGUMENTS = st.dictionaries(st.text(max_size=6), SCALAR, max_size=3).map(
    lambda d: encode(d).decode("utf-8")
)
DATA = st.from_regex(r"[A-Za-z0-9+/]{4,16}", fullmatch=True)
IMAGE = DATA.map(lambda d: {"type": "image", "media_type": "image/png", "data": d})


@st.composite
def _tools(draw: st.DrawFn) -> list[dict[str, Any]]:
    names = draw(st.lists(st.from_regex(r"[a-z_]{1,8}", fullmatch=True), unique=True, max_size=3))
    tools = []
    for name in names:
        properties = draw(
            st.dictionaries(
                st.from_regex(r"[a-z]{1,5}", fullmatch=True),
                st.just({"type": "string"}),
                max_size=3,
            )
        )
        tool: dict[str, Any] = {"name": name}
        if draw(st.booleans()):
            tool["description"] = draw(TEXT)
        tool["parameters"] = {"type": "object", "properties": properties}
        tools.append(tool)
    return tools


@st.composite
def _conversation(draw: st.DrawFn, family: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    counter = iter(range(10_000))
    for _ in range(draw(st.integers(1, 3))):
        user = draw(
            st.lists(
                st.one_of(TEXT.map(lambda t: {"type": "text", "text": t}), IMAGE),
                min_size=1,
                max_size=3,
            )
        )
        messages.append({"role": "user", "content": user})
        blocks: list[dict[str, Any]] = []
        if draw(st.booleans()):
            if family == "openai":
                blocks.append({"type": "reasoning", "text": draw(TEXT)})
            elif draw(st.booleans()):
                blocks.append({"type": "reasoning", "text": draw(TEXT), "signature": draw(DATA)})
            else:
                blocks.append({"type": "reasoning", "text": "", "data": draw(DATA)})
        texts = draw(st.lists(TEXT, max_size=1 if family == "openai" else 2))
        blocks += [{"type": "text", "text": t} for t in texts]
        calls = [
            {
                "type": "tool_call",
                "id": f"call_{next(counter)}",
                "name": draw(TEXT),
                "arguments": draw(ARGUMENTS),
            }
            for _ in range(draw(st.integers(0, 2)))
        ]
        if not blocks and not calls:
            blocks.append({"type": "text", "text": draw(TEXT)})
        messages.append({"role": "assistant", "content": blocks + calls})
        for call in calls:
            if family == "openai":
                content: Any = draw(st.text(max_size=20))
                error = False
            else:
                content = draw(
                    st.one_of(
                        TEXT,
                        st.lists(
                            TEXT.map(lambda t: {"type": "text", "text": t}), min_size=1, max_size=2
                        ),
                    )
                )
                error = draw(st.booleans())
            result = {
                "type": "tool_result",
                "tool_call_id": call["id"],
                "content": content,
                "is_error": error,
            }
            messages.append({"role": "tool", "content": [result]})
    messages.append({"role": "user", "content": [{"type": "text", "text": draw(TEXT)}]})
    return messages


def _round_trip(family: str, data: st.DataObject) -> None:
    messages = freeze(data.draw(_conversation(family)))
    tools = data.draw(_tools())
    system = data.draw(st.one_of(st.none(), TEXT))
    if family == "openai":
        upstream = Upstream.resolve("deepseek", base_url="http://x")
        config = LlmCallConfig(
            provider="deepseek", model="m", wire={"reasoning_send_back": "present"}
        )
        wire: Any = OpenAIWire(dialect="deepseek", send_back="present")
    else:
        upstream = Upstream.resolve("anthropic", base_url="http://x")
        # What the proxy logs: the client's own cache markers (here none).
        config = LlmCallConfig(
            provider="anthropic", model="m", max_tokens=64, wire={"cache_markers": "client"}
        )
        wire = AnthropicWire()
    header = EpochHeader(config=config, system=system, tools=tools)
    body = decode(wire.encode_body(LlmRequest(header=header, messages=messages)))
    parse = parse_openai if family == "openai" else parse_anthropic
    parsed = parse(body)
    neutral = []
    for i, message in enumerate(parsed.messages):
        if family == "openai":
            done = translate_openai(message, f"messages[{i}]", dialect="deepseek")
            assert "present" in done.rules
        else:
            done = translate_anthropic(message, f"messages[{i}]")
        neutral.extend(done.messages)
        assert done.keys == tuple(loose_key(m) for m in done.messages)
    assert encode(FrozenList(neutral)) == encode(messages)
    assert parsed.system == system
    assert encode(list(parsed.tools)) == encode(tools)
    # The proxy's own checks accept it, and the header it builds is the one encoded.
    translator = Translator(upstream)
    found = translator.messages(parsed)
    assert encode(FrozenList(found.neutral)) == encode(messages)
    rebuilt = translator.header(parsed, found.rules, header)
    translator.check_header(parsed, rebuilt)
    assert rebuilt.system == header.system
    assert list(rebuilt.tools) == list(header.tools)
    assert chain_of(found.keys) == chain_of([loose_key(m) for m in messages])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_openai_round_trip(data: st.DataObject) -> None:
    _round_trip("openai", data)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_anthropic_round_trip(data: st.DataObject) -> None:
    _round_trip("anthropic", data)


def test_loose_keys_ignore_what_clients_rewrite() -> None:
    logged = freeze(
        {
            "role": "assistant",
            "content": [
                {"type": "reasoning", "text": "hm"},
                {"type": "text", "text": "Sure. "},
                {"type": "tool_call", "id": "c", "name": "f", "arguments": '{"b": 2, "a": 1}'},
            ],
        }
    )
    echoed = freeze(
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Sure."},
                {"type": "tool_call", "id": "c", "name": "f", "arguments": '{"a":1,"b":2}'},
            ],
        }
    )
    assert loose_key(logged) == loose_key(echoed)
    other = freeze(
        {
            "role": "assistant",
            "content": [
                {"type": "tool_call", "id": "c", "name": "f", "arguments": '{"a":1,"b":3}'},
            ],
        }
    )
    assert loose_key(other) != loose_key(echoed)
    assert chain_of([b"a", b"b"])[0] == chain_of([b"a"])[0] != chain_of([b"b"])[0]


def test_the_session_header_changes_the_checked_header_only_by_its_send_back_rule() -> None:
    """``for_session`` gives what ``header`` with the session's header gives,
    for every set of send-back rules the messages allow and every session
    header (none, another model, each explicit rule): the checked header
    itself when the session changes nothing, a new one when its rule wins."""
    upstream = Upstream.resolve("deepseek", base_url="http://x")
    translator = Translator(upstream)
    request = translator.parse(
        "openai",
        decode(
            encode({"model": "deepseek-reasoner", "messages": [{"role": "user", "content": "hi"}]})
        ),
    )
    currents: list[EpochHeader | None] = [None]
    for model in ("deepseek-chat", "deepseek-reasoner"):
        currents.append(EpochHeader(config=LlmCallConfig(provider="deepseek", model=model)))
        for rule in ALL_RULES:
            config = LlmCallConfig(
                provider="deepseek", model=model, wire={"reasoning_send_back": rule}
            )
            currents.append(EpochHeader(config=config))
    kept = changed = 0
    for size in range(1, len(ALL_RULES) + 1):
        for rules in map(frozenset, combinations(ALL_RULES, size)):
            checked = translator.header(request, rules, None)
            for current in currents:
                made = translator.for_session(request, rules, current, checked)
                assert made.to_json() == translator.header(request, rules, current).to_json()
                kept += made is checked
                changed += made is not checked
    assert kept
    assert changed


def test_the_header_check_builds_a_header_once_and_still_compares_every_body(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The rebuilt non-history part is kept per header: one build for a run of
    requests under one header, a new one for another header, and each body is
    still compared with it (a body that differs is refused under a known header)."""
    built: list[object] = []
    build = OpenAIWire.build_body

    def counted(self: OpenAIWire, request: LlmRequest) -> Any:
        built.append(request)
        return build(self, request)

    monkeypatch.setattr(OpenAIWire, "build_body", counted)
    translator = Translator(Upstream.resolve("deepseek", base_url="http://x"))

    def request(temperature: float, text: str) -> Any:
        body = {"model": "deepseek-chat", "temperature": temperature, "messages": []}
        body["messages"] = [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": text},
        ]
        return translator.parse("openai", decode(encode(body)))

    def header(parsed: Any) -> EpochHeader:
        return translator.header(parsed, translator.messages(parsed).rules, None)

    first = request(0.5, "one")
    checked = header(first)
    for text in ("one", "two", "three"):
        translator.check_header(request(0.5, text), checked)
    assert len(built) == 1
    with pytest.raises(ProxyError, match="temperature"):
        translator.check_header(request(0.7, "four"), checked)
    other = request(0.7, "five")
    translator.check_header(other, header(other))
    assert len(built) == 2
    with pytest.raises(ProxyError, match="temperature"):
        translator.check_header(first, header(other))
