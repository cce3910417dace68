"""The loop on the real local model: the second turn reuses the first turn's KV prefix.

SmolLM2-135M runs in this process through llama.cpp; nothing is faked. The
only addition is a thin recorder at the edge that keeps the body bytes the
loop handed the local client, so they can be compared with what the audit
path rebuilds from the log alone.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from tapelog.agent import Agent
from tapelog.audit import encode_request, rebuild_requests
from tapelog.llm import LlmRequest, make_client
from tapelog.llm._api import AbortHandle, WireBody, WireFormat
from tapelog.llm._local import LocalClient
from tapelog.log import decode
from tapelog.log._api import FrozenDict, LlmCallConfig, Session

CONFIG = LlmCallConfig(provider="local", model="smollm2-135m", max_tokens=24, temperature=0.0)


class RecordingClient:
    """Delegates to the local client and keeps each body it was sent."""

    def __init__(self, inner: LocalClient) -> None:
        self.inner = inner
        self.provider = inner.provider
        self.sent: list[bytes] = []

    @property
    def wire(self) -> WireFormat:
        return self.inner.wire

    async def stream(
        self, request: LlmRequest, *, abort: AbortHandle, body: bytes | WireBody | None = None
    ) -> AsyncIterator[FrozenDict]:
        assert body is not None, "the loop always passes the bytes it checked"
        self.sent.append(bytes(body))
        async for chunk in self.inner.stream(request, abort=abort, body=body):
            yield chunk


async def test_two_turns_the_second_reads_the_first_turns_kv_prefix() -> None:
    local = make_client(CONFIG)
    assert isinstance(local, LocalClient)
    await local.reset_cache()  # the model is shared per process: start from token 0
    client = RecordingClient(local)
    session = Session()
    agent = Agent(
        session,
        client,
        config=CONFIG,
        system="You are a helpful assistant. Answer in one short sentence.",
        check=True,
    )

    first = await agent.run("What is the capital of France?")
    second = await agent.run("And what is the capital of Italy?")

    for result in (first, second):
        assert result.reason["kind"] in ("completed", "max_tokens")
    assert first.text
    assert second.text
    messages = [e for e in session.events if e.type == "assistant/message"]
    assert len(messages) == 2
    u1, u2 = messages[0].data["usage"], messages[1].data["usage"]
    assert u1["cache_read"] == 0  # a fresh KV cache: everything evaluated
    prompt1 = u1["input"] + u1["cache_read"]
    # The second request extends the first, so llama.cpp kept at least the first
    # prompt's tokens in its KV cache and evaluated only what followed.
    assert u2["cache_read"] > 0
    assert u2["cache_read"] >= prompt1
    assert u2["input"] + u2["cache_read"] > u2["cache_read"]

    rebuilt = [encode_request(r.request) for r in rebuild_requests(session.events)]
    assert len(client.sent) == 2
    assert rebuilt == client.sent
    # append-only: the second body's messages begin with the first body's
    sent1, sent2 = (decode(body)["messages"] for body in client.sent)
    assert sent2[: len(sent1)] == sent1
