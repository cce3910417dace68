"""Cache numbers over short conversations, one per provider rule, computed by hand.

Token estimate: ceil(canonical JSON bytes / 4) per segment. The builders in
_helpers make each message (OpenAI wire) or block (Anthropic wire) an exact byte
size, so every number below is arithmetic on the sizes in the comments.
"""

from __future__ import annotations

from typing import Any

import httpx
from httpx_sse import aconnect_sse

from tapelog.emulator import Emulator
from tapelog.log import decode

from ._helpers import BASE, block, message


async def _openai_usage(client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> Any:
    """Stream a chat completion and return the usage of its last (choices: []) chunk."""
    body = {**body, "stream": True, "stream_options": {"include_usage": True}}
    usage = None
    async with aconnect_sse(client, "POST", path, json=body) as source:
        async for sse in source.aiter_sse():
            if sse.data != "[DONE]":
                chunk = decode(sse.data)
                if chunk["choices"] == []:
                    usage = chunk["usage"]
    return usage


async def _anthropic_usage(client: httpx.AsyncClient, body: dict[str, Any]) -> Any:
    """Stream a message and return the (cumulative) usage of its message_delta."""
    usage = None
    async with aconnect_sse(
        client, "POST", "/v1/messages", json={**body, "stream": True}
    ) as source:
        async for sse in source.aiter_sse():
            if sse.event == "message_delta":
                usage = decode(sse.data)["usage"]
    return usage


def _hits(usage: Any) -> tuple[int, int, int]:
    return (
        usage["prompt_tokens"],
        usage["prompt_cache_hit_tokens"],
        usage["prompt_cache_miss_tokens"],
    )


async def test_deepseek_conversation_hits_through_replies_sent_back_exactly() -> None:
    system = message("system", 256)  # 64 tokens
    u1 = message("user", 256)  # 64 tokens
    a1 = message("assistant", 128, "a")  # 32 tokens as sent back
    u2 = message("user", 128, "y")  # 32 tokens
    a2 = message("assistant", 128, "b")  # 32 tokens
    u3 = message("user", 128, "z")  # 32 tokens
    emu = Emulator(script=[{"text": a1["content"]}, {"text": a2["content"]}, {"text": "end"}])
    async with httpx.AsyncClient(transport=emu.transport(), base_url=BASE) as client:
        path = "/chat/completions"
        model = "deepseek-chat"
        # 1: empty store, prompt 64 + 64 = 128, nothing cached.
        one = await _openai_usage(client, path, {"model": model, "messages": [system, u1]})
        assert _hits(one) == (128, 0, 128)
        assert one["prompt_tokens_details"] == {"cached_tokens": 0}
        # Output: 95 characters of reply text -> ceil(95 / 4) = 24 tokens.
        assert one["completion_tokens"] == 24
        # 2: prompt 64 + 64 + 32 + 32 = 192. Request 1 stored its input (through u1)
        # and its output (through a1): the longest stored prefix is 160 tokens,
        # which is 2 whole 64-token units = 128 hit, 64 miss.
        two = await _openai_usage(client, path, {"model": model, "messages": [system, u1, a1, u2]})
        assert _hits(two) == (192, 128, 64)
        # 3: prompt 192 + 32 + 32 = 256; stored through a2 = 224 tokens -> 3 units.
        three = await _openai_usage(
            client, path, {"model": model, "messages": [system, u1, a1, u2, a2, u3]}
        )
        assert _hits(three) == (256, 192, 64)
        # Had the client altered a1 (same size, one byte different), only the
        # stored prefix through u1 would match: 128 tokens, 2 units.
        altered = {**a1, "content": a1["content"][:-1] + "c"}
        four = await _openai_usage(
            client, path, {"model": model, "messages": [system, u1, altered, u2, a2, u3]}
        )
        assert _hits(four) == (256, 128, 128)
    assert [r.usage for r in emu.received[:3]] == [one, two, three]
    assert {r.rule for r in emu.received} == {"deepseek"}


async def test_openai_conversation_caches_from_1024_tokens_in_128_token_steps() -> None:
    system = message("system", 4000)  # 1000 tokens
    u1 = message("user", 256)  # 64
    a1 = message("assistant", 256, "a")  # 64
    u2 = message("user", 256, "y")  # 64
    a2 = message("assistant", 256, "b")  # 64
    u3 = message("user", 256, "z")  # 64
    emu = Emulator()
    async with httpx.AsyncClient(transport=emu.transport(), base_url=BASE) as client:
        path = "/openai/v1/chat/completions"
        model = "gpt-4o"
        # 1: prompt 1064, empty store -> 0 cached.
        one = await _openai_usage(client, path, {"model": model, "messages": [system, u1]})
        assert (one["prompt_tokens"], one["prompt_tokens_details"]["cached_tokens"]) == (1064, 0)
        assert "prompt_cache_hit_tokens" not in one
        # 2: prompt 1192; longest stored prefix is request 1's prompt, 1064 tokens
        # (>= 1024), so cached = 128 * floor(1064 / 128) = 1024.
        two = await _openai_usage(client, path, {"model": model, "messages": [system, u1, a1, u2]})
        assert (two["prompt_tokens"], two["prompt_tokens_details"]["cached_tokens"]) == (1192, 1024)
        # 3: prompt 1320; longest stored prefix is request 2's prompt, 1192 tokens,
        # so cached = 128 * floor(1192 / 128) = 1152.
        three = await _openai_usage(
            client, path, {"model": model, "messages": [system, u1, a1, u2, a2, u3]}
        )
        assert (three["prompt_tokens"], three["prompt_tokens_details"]["cached_tokens"]) == (
            1320,
            1152,
        )
    assert {r.rule for r in emu.received} == {"openai"}


async def test_openai_reads_a_prefix_only_under_the_prompt_cache_key_it_was_stored_with() -> None:
    system = message("system", 4000)  # 1000 tokens
    u1 = message("user", 256)  # 64
    emu = Emulator()
    async with httpx.AsyncClient(transport=emu.transport(), base_url=BASE) as client:
        path = "/openai/v1/chat/completions"
        body = {"model": "gpt-4o", "messages": [system, u1]}
        cached = []
        for key in ("a", "a", "b", None, "b"):
            keyed = body if key is None else {**body, "prompt_cache_key": key}
            usage = await _openai_usage(client, path, keyed)
            cached.append(usage["prompt_tokens_details"]["cached_tokens"])
    # Stored under "a", read under "a"; "b" and no key are other routes.
    assert cached == [0, 1024, 0, 0, 1024]


async def test_anthropic_conversation_reads_at_breakpoints_within_20_blocks() -> None:
    system = [block(4000, cached=True)]  # 1000 tokens, a breakpoint
    u1 = block(256)  # 64 tokens
    a1 = block(128, "a")  # 32 tokens: the reply, as the client sends it back
    u2a, u2b = block(128, "y"), block(64, "w")  # 32 + 16 tokens
    a2 = block(128, "b")  # 32 tokens
    tail = [block(32, "t") for _ in range(21)]  # 21 blocks of 8 tokens
    emu = Emulator(script=[{"text": a1["text"]}, {"text": a2["text"]}])
    base = {"model": "claude-sonnet-4-5", "max_tokens": 100, "system": system}
    async with httpx.AsyncClient(transport=emu.transport(), base_url=BASE) as client:
        # 1: breakpoints after the system (1000 tokens: below the 1024 minimum, no
        # write) and after u1 (1064 tokens): nothing read, 1064 written, 0 uncached.
        one = await _anthropic_usage(
            client,
            {**base, "messages": [{"role": "user", "content": [{**u1, **_cc()}]}]},
        )
        assert _split(one) == (0, 1064, 0)
        # 2: blocks S, u1, a1, u2a (breakpoint), u2b = 1144 tokens. From u2a the
        # lookback finds request 1's write after u1 two blocks back: read 1064;
        # written 1128 - 1064 = 64 (through the last breakpoint); uncached u2b = 16.
        conversation = [
            {"role": "user", "content": [u1]},
            {"role": "assistant", "content": [a1]},
            {"role": "user", "content": [{**u2a, **_cc()}, u2b]},
        ]
        two = await _anthropic_usage(client, {**base, "messages": conversation})
        assert _split(two) == (1064, 64, 16)
        # 3: the breakpoint moves to the end of 21 new blocks: blocks S, u1, a1,
        # u2a, u2b, a2, t0..t20 = 1144 + 32 + 168 = 1344 tokens. The writes (after
        # u1 and after u2a) are more than 20 blocks behind it, and the system alone
        # was never written: nothing read, the whole prefix written again.
        conversation = [
            {"role": "user", "content": [u1]},
            {"role": "assistant", "content": [a1]},
            {"role": "user", "content": [u2a, u2b]},
            {"role": "assistant", "content": [a2]},
            {"role": "user", "content": [*tail[:-1], {**tail[-1], **_cc()}]},
        ]
        three = await _anthropic_usage(client, {**base, "messages": conversation})
        assert _split(three) == (0, 1344, 0)
    assert [r.usage for r in emu.received] == [one, two, three]


def _cc() -> dict[str, Any]:
    return {"cache_control": {"type": "ephemeral"}}


def _split(usage: Any) -> tuple[int, int, int]:
    return (
        usage["cache_read_input_tokens"],
        usage["cache_creation_input_tokens"],
        usage["input_tokens"],
    )


async def test_deepseek_reply_with_reasoning_hits_whether_or_not_reasoning_is_sent_back() -> None:
    user = message("user", 256)  # 64 tokens
    emu = Emulator(script=[{"reasoning": "r" * 200, "text": "t" * 200}] * 3)
    async with httpx.AsyncClient(transport=emu.transport(), base_url=BASE) as client:
        await _openai_usage(client, "/v1/chat/completions", {"model": "m", "messages": [user]})
        bare = {"role": "assistant", "content": "t" * 200}  # 233 bytes -> 59 tokens
        full = {**bare, "reasoning_content": "r" * 200}  # 462 bytes -> 116 tokens
        nxt = message("user", 64, "n")  # 16 tokens
        for sent, through in ((bare, 64 + 59), (full, 64 + 116)):
            usage = await _openai_usage(
                client, "/v1/chat/completions", {"model": "m", "messages": [user, sent, nxt]}
            )
            # Stored through the reply either way: whole 64-token units of it.
            assert usage["prompt_cache_hit_tokens"] == 64 * (through // 64)


async def test_another_model_or_changed_tools_share_no_prefix() -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    first = [message("system", 4000), message("user", 256)]
    emu = Emulator()
    async with httpx.AsyncClient(transport=emu.transport(), base_url=BASE) as client:
        path = "/openai/v1/chat/completions"
        body = {"model": "a", "tools": tools, "messages": first}
        await _openai_usage(client, path, body)
        again = await _openai_usage(client, path, body)
        assert again["prompt_tokens_details"]["cached_tokens"] == 1024
        other_model = await _openai_usage(client, path, {**body, "model": "b"})
        assert other_model["prompt_tokens_details"]["cached_tokens"] == 0
        renamed = [{"type": "function", "function": {**tools[0]["function"], "name": "g"}}]
        other_tools = await _openai_usage(client, path, {**body, "tools": renamed})
        assert other_tools["prompt_tokens_details"]["cached_tokens"] == 0
        emu.reset_cache()
        after_reset = await _openai_usage(client, path, body)
        assert after_reset["prompt_tokens_details"]["cached_tokens"] == 0


async def test_envelope_key_order_and_null_content_are_not_tokens() -> None:
    # A chat template renders role and content the same whatever the JSON key
    # order, and content null like no content; only what it copies verbatim counts.
    emu = Emulator(script=[{"tool_calls": [{"name": "f", "arguments": '{"b":1,"a":2}'}]}, {}, {}])
    user = message("user", 4000)  # 1000 tokens
    async with httpx.AsyncClient(transport=emu.transport(), base_url=BASE) as client:
        await _openai_usage(client, "/chat/completions", {"model": "m", "messages": [user]})
        call = {"id": "call_emu_000001_0", "type": "function"}
        sent = {
            "tool_calls": [{"function": {"arguments": '{"b":1,"a":2}', "name": "f"}, **call}],
            "content": None,
            "role": "assistant",
        }
        result = {"role": "tool", "tool_call_id": "call_emu_000001_0", "content": "42"}
        usage = await _openai_usage(
            client, "/chat/completions", {"model": "m", "messages": [user, sent, result]}
        )
        # The reply as the emulator stored it, {"role","content":null,"tool_calls":[...]},
        # is 151 bytes = 38 tokens, so the stored prefix is 1000 + 38 = 1038 tokens:
        # 16 whole units = 1024 (without the reply it would be 15 units = 960).
        assert usage["prompt_cache_hit_tokens"] == 1024
        # Re-encoding the arguments (other key order) is a different prompt.
        function = {"name": "f", "arguments": '{"a":2,"b":1}'}
        reordered = {**sent, "tool_calls": [{**sent["tool_calls"][0], "function": function}]}
        usage = await _openai_usage(
            client, "/chat/completions", {"model": "m", "messages": [user, reordered, result]}
        )
        assert usage["prompt_cache_hit_tokens"] == 960  # only the user message: 64 * 15
