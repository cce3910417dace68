"""Compaction: summarise old history with a one-shot call, shadowing it in the log.

The summary call replays the conversation itself up to the cut -- the last
logged request header (system, tools, config, prefix) and the same messages --
and appends one instruction as a final user message, so it reuses the
provider's cached prefix. Every input of the call is logged before it is sent:
``compact/start`` names the region, the instruction and ``max_tokens``, so the
request is a pure function of the log (``tapelog requests --one-shot`` rebuilds
it with :func:`tapelog.request.summary_request`, the function built it here)
and the invariant checker checks it like a loop request.

Then ``compact/summary`` (provider, model, max_tokens, usage, shadowed range
and seqs, token estimates), the replacing ``user/message`` (surface ``replace``
citing the shadowed seqs), ``compact/end``. A failure logs ``compact/end`` with
the error (and ``"sent": false`` when the call never left) and changes nothing
else. When the region itself is too long to summarise, a new compaction tries
its first half, at most three in all. docs/compaction.md describes the policy.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tapelog._errors import ContextOverflowError, ProviderError, ReconstructionError, TapelogError
from tapelog.checker._api import RequestChecker
from tapelog.llm import LlmRequest, ProviderClient
from tapelog.llm._api import AbortHandle, assemble_message, client_wire, estimate_tokens
from tapelog.log import encode
from tapelog.log._api import Event, FrozenDict, Session, derive_event_message
from tapelog.request import summary_request

__all__ = ["CompactionPolicy", "CompactionResult", "choose_region", "compact"]

DEFAULT_INSTRUCTION = (
    "Summarise the conversation so far for your own later use. Keep every fact, decision, "
    "file name, number and open task needed to continue the work; drop pleasantries. The "
    "most recent messages stay visible after your summary, so concentrate on what came "
    "before them. Reply with the summary only."
)


_MAX_ATTEMPTS = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionPolicy:
    """When to compact and how.

    ``context_window`` (tokens) enables automatic compaction once the projected
    request passes ``threshold`` of it; ``None`` leaves only manual compaction
    and recovery from a provider's context-overflow error (``on_overflow``).
    ``keep_messages`` recent messages stay verbatim (the cut moves earlier
    rather than separate a tool call from its result).
    """

    context_window: int | None = None
    threshold: float = 0.8
    keep_messages: int = 6
    max_tokens: int = 1024
    instruction: str = DEFAULT_INSTRUCTION
    on_overflow: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionResult:
    """What a compaction did: ``ok`` with the replacing event, or the error."""

    id: str
    ok: bool
    summary: Event | None = None
    error: str | None = None


def _is_tool_result(session: Session, seq: int) -> bool:
    return session.event(seq).type == "tool/result"


def choose_region(session: Session, keep_messages: int) -> list[int]:
    """The surface seqs to shadow: all but the last ``keep_messages`` nodes.

    The cut never separates a tool call from its result: if the first kept
    node is a tool result, the cut moves back until the kept part starts at
    the assistant message that made the call. Empty when there is nothing to
    compact.
    """
    nodes = session.surface
    return _safe_prefix(session, nodes, len(nodes) - keep_messages)


def _safe_prefix(session: Session, nodes: Sequence[int], cut: int) -> list[int]:
    """``nodes[:cut]``, with the cut moved back off any tool result."""
    cut = max(0, cut)
    while 0 < cut < len(nodes) and _is_tool_result(session, nodes[cut]):
        cut -= 1
    return list(nodes[:cut])


def _tokens_of(messages: Sequence[Any]) -> int:
    return estimate_tokens(encode(list(messages)))


async def _no_flush() -> None:
    """No store to make durable."""


class _NotSent(Exception):
    """Internal: the summary call failed before it was sent."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


@dataclass(frozen=True, slots=True, kw_only=True)
class _Call:
    """What one compaction needs besides the session: how to send and check."""

    client: ProviderClient
    policy: CompactionPolicy
    checker: RequestChecker | None
    flush: Callable[[], Awaitable[None]]
    abort: AbortHandle | None


async def compact(
    session: Session,
    client: ProviderClient,
    policy: CompactionPolicy,
    *,
    trigger: str,
    turn: int | None,
    context_tokens: int,
    checker: RequestChecker | None = None,
    flush: Callable[[], Awaitable[None]] | None = None,
    abort: AbortHandle | None = None,
) -> CompactionResult:
    """Run one compaction (see the module docstring); provider errors do not raise.

    A region too long to summarise (the call overflows) is halved by a new
    compaction, at most three in all; the result is the last one's.
    """
    call = _Call(
        client=client, policy=policy, checker=checker, flush=flush or _no_flush, abort=abort
    )
    region = choose_region(session, policy.keep_messages)
    attempt = 0
    while True:
        attempt += 1
        result, overflowed = await _compact_once(
            session, call, region, trigger=trigger, turn=turn, context_tokens=context_tokens
        )
        smaller = _safe_prefix(session, region, len(region) // 2) if overflowed else []
        if not smaller or attempt >= _MAX_ATTEMPTS:
            return result
        region = smaller


def _start(
    session: Session,
    call: _Call,
    region: list[int],
    *,
    trigger: str,
    turn: int | None,
    context_tokens: int,
) -> Event:
    """Log ``compact/start`` with every input of the summary call it will make."""
    number = 1 + sum(1 for e in session.events if e.type == "compact/start")
    data: dict[str, Any] = {
        "id": f"c{number}",
        "trigger": trigger,
        "turn": turn,
        "context_tokens": context_tokens,
    }
    if region and session.header is not None:
        data["region"] = region
        data["instruction"] = call.policy.instruction
        data["max_tokens"] = call.policy.max_tokens
    return session.append("compact/start", data)


async def _summarise(session: Session, call: _Call, start: Event) -> tuple[LlmRequest, Any]:
    """Build the summary call from the log, check it, send it; the assembled answer."""
    header = session.header
    region = start.data.get("region")
    if not region or header is None:
        raise _NotSent(
            TapelogError(
                "nothing to compact: "
                + (
                    f"the last {call.policy.keep_messages} messages are kept as they are"
                    if not region
                    else "no request has been sent yet, so there is no header to summarise with"
                )
            )
        )
    try:
        request = summary_request(
            header=header,
            nodes=session.history(),
            region=region,
            instruction=start.data["instruction"],
            max_tokens=start.data["max_tokens"],
            session_id=session.id,
            anchor_seq=start.seq,
        )
        wire = client_wire(call.client, request.config, checked=call.checker is not None)
        body = wire.encode_body(request)
        if call.checker is not None:
            call.checker.check(request, body)
        await call.flush()  # durable (off the event loop) before the call is sent
    except Exception as exc:
        raise _NotSent(exc) from exc
    abort = call.abort or AbortHandle()
    chunks: list[FrozenDict] = []
    async for chunk in call.client.stream(request, abort=abort, body=body):
        chunks.append(chunk)
    return request, assemble_message(chunks)


async def _compact_once(
    session: Session,
    call: _Call,
    region: list[int],
    *,
    trigger: str,
    turn: int | None,
    context_tokens: int,
) -> tuple[CompactionResult, bool]:
    """One compaction; the result and whether the summary call overflowed."""
    start = _start(session, call, region, trigger=trigger, turn=turn, context_tokens=context_tokens)
    cid = start.data["id"]
    try:
        request, assembled = await _summarise(session, call, start)
        summary = _apply(session, call.policy, cid, region, request, assembled)
    except _NotSent as failed:
        _fail(session, cid, failed.error, sent=False)
        error = failed.error
        if isinstance(error, ReconstructionError) or not isinstance(error, TapelogError):
            raise error from None  # a refused request or a bug: not a failed summary
        return CompactionResult(id=cid, ok=False, error=str(failed.error)), False
    except (ProviderError, TapelogError) as exc:
        _fail(session, cid, exc, sent=True)
        overflowed = isinstance(exc, ContextOverflowError)
        return CompactionResult(id=cid, ok=False, error=str(exc)), overflowed
    except BaseException as exc:
        _fail(session, cid, exc, sent=True)
        raise
    session.append("compact/end", {"id": cid, "ok": True})
    return CompactionResult(id=cid, ok=True, summary=summary), False


def _fail(session: Session, cid: str, exc: BaseException, *, sent: bool) -> None:
    data: dict[str, Any] = {
        "id": cid,
        "ok": False,
        "error": {"type": type(exc).__name__, "message": str(exc)},
    }
    if not sent:
        data["sent"] = False
    session.append("compact/end", data)


def _apply(
    session: Session,
    policy: CompactionPolicy,
    cid: str,
    region: list[int],
    request: LlmRequest,
    assembled: Any,
) -> Event:
    """Log the summary and the replacing message; refuse a summary that saves nothing."""
    if assembled.interrupted or assembled.finish != "stop":
        raise TapelogError(f"the summary call ended with {assembled.finish!r}, not a full answer")
    text = "".join(b["text"] for b in assembled.content if b["type"] == "text").strip()
    shadowed_tokens = _tokens_of(
        [m for m in (derive_event_message(session.event(s)) for s in region) if m is not None]
    )
    content = [{"type": "text", "text": text}]
    summary_tokens = estimate_tokens(encode(content))
    if not text or summary_tokens >= shadowed_tokens:
        raise TapelogError(
            f"the summary ({summary_tokens} tokens) is not smaller than the "
            f"{shadowed_tokens} tokens it would replace; nothing was changed"
        )
    session.append(
        "compact/summary",
        {
            "id": cid,
            "provider": request.config.provider,
            "model": request.config.model,
            "max_tokens": policy.max_tokens,
            "usage": assembled.usage if assembled.usage is not None else {},
            "shadowed": {"start": region[0], "end": region[-1]},
            "shadowed_seqs": region,
            "shadowed_tokens": shadowed_tokens,
            "summary_tokens": summary_tokens,
        },
    )
    return session.append(
        "user/message",
        {"content": content, "source": {"kind": "compaction", "id": cid}},
        surface_op={"op": "replace", "start": region[0], "end": region[-1]},
        source_seqs=region,
    )
