"""A client's system prompt as blocks, and the request headers a config logs."""

from __future__ import annotations

import pytest

from tapelog._errors import HeaderError
from tapelog.log import encode
from tapelog.log._api import (
    EpochHeader,
    HeaderRecorder,
    LlmCallConfig,
    Session,
    apply_header_delta,
    diff_header,
    header_from_json,
    system_lines,
)

CONFIG = LlmCallConfig(provider="anthropic", model="claude-sonnet-4-5")
BLOCKS = [
    {"type": "text", "text": "billing header"},
    {"type": "text", "text": "You are Claude.", "cache_control": {"type": "ephemeral"}},
    {"type": "text", "text": "Rules.", "cache_control": {"type": "ephemeral", "ttl": "1h"}},
]


def test_a_block_system_prompt_keeps_every_field_in_order() -> None:
    header = EpochHeader(config=CONFIG, system=BLOCKS)
    logged = header.to_json()
    assert logged["system"] == BLOCKS
    assert encode(logged["system"]) == encode(BLOCKS)
    assert header_from_json(logged) == header
    assert system_lines(header.system)[1] == (
        '{"type":"text","text":"You are Claude.","cache_control":{"type":"ephemeral"}}'
    )


def test_one_changed_block_is_a_block_level_delta() -> None:
    old = EpochHeader(config=CONFIG, system=BLOCKS)
    moved = [*BLOCKS[:2], {"type": "text", "text": "Rules."}]  # the 1h marker dropped
    new = EpochHeader(config=CONFIG, system=moved)
    delta = diff_header(old, new)
    assert delta == {"system": {"keep_start": 2, "keep_end": 0, "blocks": [moved[2]]}}
    assert apply_header_delta(old, delta) == new
    session = Session("s-blocks", clock=lambda: 1)
    recorder = HeaderRecorder(session)
    recorder.record(old)
    written = recorder.record(new)
    assert written is not None
    assert written.type == "request/header-delta"


def test_a_text_prompt_that_becomes_blocks_and_back_round_trips() -> None:
    text = EpochHeader(config=CONFIG, system="one\ntwo")
    blocks = EpochHeader(config=CONFIG, system=BLOCKS)
    for a, b in ((text, blocks), (blocks, text)):
        delta = diff_header(a, b)
        assert delta is not None
        assert apply_header_delta(a, delta) == b


def test_a_config_logs_only_headers_that_change_what_the_model_reads() -> None:
    config = LlmCallConfig(
        provider="anthropic",
        model="m",
        headers={"anthropic-beta": "context-management-2025-06-27", "anthropic-version": "v"},
    )
    assert LlmCallConfig.from_json(config.to_json()) == config
    assert list(config.to_json()["headers"]) == ["anthropic-beta", "anthropic-version"]
    for name in ("x-api-key", "authorization", "Anthropic-Beta"):
        with pytest.raises(HeaderError, match=r"config\.headers may hold only"):
            LlmCallConfig(provider="anthropic", model="m", headers={name: "x"})
