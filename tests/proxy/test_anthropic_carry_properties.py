"""Property: any Anthropic Messages body the proxy accepts comes back from the log's
wire parsing equal to the client's (carry, never reshape), and the header and
messages it logs are stable under a second translation."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tapelog.llm import LlmRequest
from tapelog.llm._api import wire_for
from tapelog.log import decode, encode
from tapelog.log._api import FrozenList, freeze
from tapelog.proxy import Upstream
from tapelog.proxy._translate import Translator

WORD = st.text(alphabet="abc xyz", min_size=1, max_size=6).filter(lambda t: t.strip())
SCALAR = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), WORD)
VALUE = st.recursive(
    SCALAR,
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(WORD, inner, max_size=2),
    max_leaves=4,
)
MARK = st.sampled_from(
    [{"type": "ephemeral"}, {"type": "ephemeral", "ttl": "5m"}, {"type": "ephemeral", "ttl": "1h"}]
)
# Fields a client may put on any block: markers, citations, fields from the future.
EXTRA = st.dictionaries(
    st.sampled_from(["cache_control", "citations", "zz_future"]), VALUE, max_size=2
).map(lambda d: {k: ({"type": "ephemeral"} if k == "cache_control" else v) for k, v in d.items()})


def _with(block: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    return {**block, **extra}


TEXT = st.builds(_with, st.builds(lambda t: {"type": "text", "text": t}, WORD), EXTRA)
OTHER = st.builds(
    _with,
    st.sampled_from(
        [
            {
                "type": "document",
                "source": {"type": "text", "media_type": "text/plain", "data": "d"},
            },
            {"type": "search_result", "source": "s", "title": "t", "content": []},
            {"type": "image", "source": {"type": "file", "file_id": "f"}},
            {"type": "image", "source": {"type": "url", "url": "https://x.test/i.png"}},
            {"type": "hologram"},
        ]
    ),
    EXTRA,
)
USER_CONTENT = st.one_of(WORD, st.lists(st.one_of(TEXT, OTHER), min_size=1, max_size=3))
THINKING = st.builds(
    lambda t, s, e: {"type": "thinking", "thinking": t, "signature": s, **e}, WORD, WORD, EXTRA
)
ASSISTANT_CONTENT = st.one_of(
    WORD,
    st.lists(
        st.one_of(
            TEXT,
            THINKING,
            st.just({"type": "redacted_thinking", "data": "EmwK"}),
            st.just({"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {}}),
        ),
        min_size=1,
        max_size=3,
    ),
)
MESSAGE_FIELDS = st.dictionaries(st.sampled_from(["output_config", "zz_note"]), VALUE, max_size=1)


@st.composite
def conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for i in range(draw(st.integers(1, 4))):
        role = "user" if i == 0 else draw(st.sampled_from(["user", "assistant", "system"]))
        content = draw(ASSISTANT_CONTENT if role == "assistant" else USER_CONTENT)
        messages.append({"role": role, "content": content, **draw(MESSAGE_FIELDS)})
    return messages


SYSTEM = st.one_of(st.none(), WORD, st.lists(TEXT, min_size=1, max_size=3))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations(), SYSTEM, st.dictionaries(st.sampled_from(["thinking", "metadata"]), VALUE))
def test_the_upstream_body_parses_equal_to_the_clients(
    messages: list[dict[str, Any]], system: Any, top: dict[str, Any]
) -> None:
    body: dict[str, Any] = {"model": "claude-x", "max_tokens": 8, "messages": messages, **top}
    if system is not None:
        body["system"] = system
    client = decode(encode(body))  # as the proxy decodes it
    translator = Translator(Upstream.resolve("anthropic", base_url="http://x"))
    parsed = translator.parse("anthropic", client, {"anthropic-beta": "b-1"}, "beta=true")
    found = translator.messages(parsed)
    header = translator.header(parsed, found.rules, None)
    translator.check_header(parsed, header)
    request = LlmRequest(header=header, messages=FrozenList(found.neutral))
    sent = decode(wire_for(header.config).encode_body(request))
    assert sent.pop("stream") is True
    assert sent == client
    # The same body again translates to the same log (nothing depends on order of arrival).
    again = Translator(Upstream.resolve("anthropic", base_url="http://x"))
    twice = again.messages(again.parse("anthropic", client))
    assert encode(FrozenList(twice.neutral)) == encode(freeze(found.neutral))
