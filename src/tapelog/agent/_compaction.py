"""Compaction: summarise old history with a one-shot call, shadowing it in the log.

The summary call replays the conversation itself up to the cut -- the same
header (system, tools, config) and the same messages -- and appends one
instruction as a final user message, so it reuses the provider's cached prefix. It is marked
``one_shot`` (the invariant checker skips it); its envelope is logged:
``compact/start``, ``compact/summary`` (provider, model, max_tokens, usage,
shadowed range and seqs, token estimates), the replacing ``user/message``
(surface ``replace`` citing the shadowed seqs), ``compact/end``. A failure
logs ``compact/end`` with the error and changes nothing else. docs/compaction.md
describes the policy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tapelog._errors import ContextOverflowError, ProviderError, TapelogError
from tapelog.llm import AbortHandle, LlmRequest, assemble_message
from tapelog.llm._types import ProviderClient, estimate_tokens
from tapelog.log import EpochHeader, Event, FrozenDict, Session, derive_event_message, encode
from tapelog.log._freeze import freeze_list

__all__ = ["CompactionPolicy", "CompactionResult", "choose_region", "summary_request"]

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


def summary_request(
    session: Session, header: EpochHeader, region: Sequence[int], instruction: str, max_tokens: int
) -> LlmRequest:
    """The one-shot summary request: the conversation up to the cut, as the loop
    sent it, plus the instruction.

    Same system, tools and messages in the same order, so the request is a
    prefix of the loop's own requests and reuses their cached prefix; and it
    is smaller than the conversation, so it fits where the conversation
    overflowed.
    """
    shadowed = set(region)
    nodes = [(seq, m) for seq, m in session.derive_nodes() if seq in shadowed]
    ask: dict[str, Any] = {"role": "user", "content": [{"type": "text", "text": instruction}]}
    config = header.config.replace(max_tokens=max_tokens)
    return LlmRequest(
        header=EpochHeader(
            config=config, system=header.system, tools=header.tools, prefix=header.prefix
        ),
        messages=freeze_list([*header.prefix, *(m for _, m in nodes), ask]),
        node_seqs=(*(None for _ in header.prefix), *(s for s, _ in nodes), None),
        session_id=session.id,
        boundary_seq=None,
        one_shot=True,
    )


def _tokens_of(messages: Sequence[Any]) -> int:
    return estimate_tokens(encode(list(messages)))


async def compact(
    session: Session,
    client: ProviderClient,
    header: EpochHeader,
    policy: CompactionPolicy,
    *,
    trigger: str,
    turn: int | None,
    context_tokens: int,
) -> CompactionResult:
    """Run one compaction (see the module docstring); never raises for provider errors."""
    number = 1 + sum(1 for e in session.events if e.type == "compact/start")
    cid = f"c{number}"
    region = choose_region(session, policy.keep_messages)
    session.append(
        "compact/start",
        {"id": cid, "trigger": trigger, "turn": turn, "context_tokens": context_tokens},
    )
    try:
        if not region:
            raise TapelogError(
                f"nothing to compact: the last {policy.keep_messages} messages are kept as they are"
            )
        attempts = 0
        while True:
            attempts += 1
            request = summary_request(
                session, header, region, policy.instruction, policy.max_tokens
            )
            chunks: list[FrozenDict] = []
            try:
                async for chunk in client.stream(request, abort=AbortHandle()):
                    chunks.append(chunk)
            except ContextOverflowError:
                # The region itself is too long to summarise in one call:
                # summarise its first half (the rest stays for a later round).
                smaller = _safe_prefix(session, region, len(region) // 2)
                if attempts >= _MAX_ATTEMPTS or not smaller:
                    raise
                region = smaller
                continue
            break
        assembled = assemble_message(chunks)
        if assembled.interrupted or assembled.finish != "stop":
            raise TapelogError(
                f"the summary call ended with {assembled.finish!r}, not a full answer"
            )
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
        usage = assembled.usage if assembled.usage is not None else {}
        session.append(
            "compact/summary",
            {
                "id": cid,
                "provider": request.config.provider,
                "model": request.config.model,
                "max_tokens": policy.max_tokens,
                "usage": usage,
                "shadowed": {"start": region[0], "end": region[-1]},
                "shadowed_seqs": region,
                "shadowed_tokens": shadowed_tokens,
                "summary_tokens": summary_tokens,
                "attempts": attempts,
            },
        )
        summary = session.append(
            "user/message",
            {"content": content, "source": {"kind": "compaction", "id": cid}},
            surface_op={"op": "replace", "start": region[0], "end": region[-1]},
            source_seqs=region,
        )
    except (ProviderError, TapelogError) as exc:
        error = {"type": type(exc).__name__, "message": str(exc)}
        session.append("compact/end", {"id": cid, "ok": False, "error": error})
        return CompactionResult(id=cid, ok=False, error=str(exc))
    session.append("compact/end", {"id": cid, "ok": True})
    return CompactionResult(id=cid, ok=True, summary=summary)
