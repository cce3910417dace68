"""The reply side of a step: send the bytes, log what streams back, log one message.

The loop (:mod:`tapelog.agent._loop`) has prepared, checked and flushed the
request; from here on only the provider's answer is logged. Every chunk is an
``assistant/chunk`` as it arrives; a retryable failure is an ``error`` chunk
saying how long the loop waits (and what the server asked for), flushed
before the wait; the step ends with exactly one ``assistant/message``
assembled from the last attempt's chunks.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from tapelog._errors import Aborted, ProviderError
from tapelog.agent._retry import RetryPolicy
from tapelog.llm import LlmRequest, ProviderClient
from tapelog.llm._api import AbortHandle, WireBody, assemble_message
from tapelog.log._api import Event, FrozenDict, LlmCallConfig, Session, freeze

__all__ = ["ReplySources", "StepRef", "log_attempt_error", "log_reply", "send_with_retries"]


@dataclass(frozen=True, slots=True)
class StepRef:
    """Where a reply is logged: the session, and the turn and step it belongs to."""

    session: Session
    turn: int
    step: int

    def chunk(self, chunk: Any) -> Event:
        return self.session.append(
            "assistant/chunk", {"turn": self.turn, "step": self.step, "chunk": chunk}
        )


class ReplySources:
    """The ``source`` of assistant messages: one frozen object per provider and
    model, shared by every message of a session (no copy per step)."""

    def __init__(self) -> None:
        self._sources: dict[tuple[str, str], FrozenDict] = {}

    def source(self, config: LlmCallConfig) -> FrozenDict:
        key = (config.provider, config.model)
        found = self._sources.get(key)
        if found is None:
            found = self._sources[key] = freeze({"provider": key[0], "model": key[1]})
        return found


async def send_with_retries(
    where: StepRef,
    client: ProviderClient,
    request: LlmRequest,
    body: bytes | WireBody,
    handle: AbortHandle,
    retry: RetryPolicy,
    sleep: Callable[[float], Awaitable[None]],
    flush: Callable[[], Awaitable[None]],
) -> list[FrozenDict]:
    """Send (retrying what may be retried), logging every chunk; the last attempt's chunks."""
    attempt = 0
    while True:
        attempt += 1
        chunks: list[FrozenDict] = []
        try:
            # The bytes the checker compared are the bytes sent.
            async for chunk in client.stream(request, abort=handle, body=body):
                where.chunk(chunk)
                chunks.append(chunk)
                if handle.aborted:
                    break
        except ProviderError as exc:
            if handle.aborted:
                return chunks
            if not exc.retryable or attempt >= retry.max_attempts:
                # The step's one assistant/message will be an empty,
                # interrupted one (what a failed attempt streamed stays in
                # its chunks): see the loop's _close_step.
                raise
            if retry.refuses(exc):  # a Retry-After longer than the policy waits
                raise retry.refused(exc) from exc
            delay = retry.delay(attempt, exc.retry_after)
            log_attempt_error(where, exc, attempt=attempt, retry_in=delay)
            await flush()
            await sleep(delay)
            if handle.aborted:
                raise Aborted() from None
            continue
        return chunks


def log_reply(
    where: StepRef, chunks: list[FrozenDict], handle: AbortHandle, source: FrozenDict
) -> tuple[Event, str]:
    """Log the step's one ``assistant/message``, assembled from its chunks; it
    and the finish reason (raises ``Aborted`` after logging when aborted)."""
    assembled = assemble_message(chunks)
    interrupted = handle.aborted or assembled.interrupted
    # A cut reply's tool calls never run, so they would have no results: a
    # tool call without its result makes every later request invalid on
    # both wires (and cut arguments are not even JSON). The chunks keep them.
    cut = interrupted or assembled.finish == "max_tokens"
    content = [b for b in assembled.content if not (cut and b["type"] == "tool_call")]
    data: dict[str, Any] = {
        "turn": where.turn,
        "step": where.step,
        "content": content,
        "source": source,
    }
    if assembled.usage is not None:
        data["usage"] = assembled.usage
    if interrupted:
        data["interrupted"] = True
    message = where.session.append("assistant/message", data, surface_op="append")
    if handle.aborted:
        raise Aborted()
    return message, assembled.finish


def log_attempt_error(
    where: StepRef,
    exc: ProviderError,
    *,
    attempt: int,
    retry_in: float | None = None,
    overflow: bool = False,
) -> None:
    """Log a failed attempt as an ``error`` chunk (status, message, what happens next)."""
    chunk: dict[str, Any] = {
        "kind": "error",
        "attempt": attempt,
        "status": exc.status,
        "message": str(exc),
    }
    if retry_in is not None:
        chunk["retry_in_ms"] = int(retry_in * 1000)
        if exc.retry_after is not None:  # what the server asked for
            chunk["retry_after_ms"] = int(exc.retry_after * 1000)
    if overflow:
        chunk["overflow"] = True
    where.chunk(chunk)
