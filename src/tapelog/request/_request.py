"""The neutral request and the two ways the log turns into one.

A request is the header (config, system prompt, tools, prefix) plus the
messages sent: the prefix first, then the projected history. The loop request
of a step is :func:`build_request` over the history projected before its
``step/start``; the compaction summary of a ``compact/start`` is
:func:`summary_request` over the region that event names plus its logged
instruction. The live loop, the compaction, the invariant checker and every
audit call these same functions, so there is one path from log to request.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import islice
from operator import itemgetter
from typing import Any

from tapelog.log._api import (
    EpochHeader,
    FrozenDict,
    FrozenList,
    History,
    LlmCallConfig,
    concat_frozen,
    freeze,
    freeze_faithful,
)

__all__ = [
    "LlmRequest",
    "build_request",
    "compaction_inputs",
    "instruction_message",
    "summary_request",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class LlmRequest:
    """One model request, frozen. Mutating it raises.

    ``messages`` is the full message list sent: the header's prefix messages
    first, then the projected history. ``node_seqs`` names, for each message,
    the event seq it was projected from (``None`` for prefix messages and a
    one-shot's instruction), which lets wire formats cache each message's bytes
    per surface node. ``boundary_seq`` is the seq of the event the request is
    anchored at: the ``step/start`` of a loop request, the ``compact/start`` of
    a one-shot compaction summary (``one_shot``).

    ``history`` is set by :func:`build_request` alone: the history view the
    messages after the prefix were copied from, the O(1) proof that one
    request's history extends an earlier one's (``History.extends``) for the
    body caches. It is no field of the request's value (not compared, not
    shown) and no ``dataclasses.replace`` keeps it: a request made any other
    way has none.
    """

    header: EpochHeader
    messages: FrozenList
    node_seqs: tuple[int | None, ...] = ()
    session_id: str | None = None
    boundary_seq: int | None = None
    one_shot: bool = False
    history: History | None = field(default=None, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if type(self.messages) is not FrozenList:  # already deep-frozen: keep it (O(1))
            object.__setattr__(self, "messages", freeze(list(self.messages), path="messages"))
        object.__setattr__(self, "node_seqs", tuple(self.node_seqs))

    @property
    def config(self) -> LlmCallConfig:
        return self.header.config


def build_request(
    *,
    header: EpochHeader,
    nodes: Sequence[tuple[int, FrozenDict]],
    session_id: str | None,
    boundary_seq: int | None,
    one_shot: bool = False,
) -> LlmRequest:
    """The request for a header and a projected history: prefix first, then history.

    ``nodes`` is a :class:`tapelog.log.History` (``Session.history()``: the
    request is then two C-level list copies, whatever the history's length)
    or ``(seq, message)`` pairs such as ``Session.derive_nodes()``. The
    messages are frozen already and are not walked again.
    """
    prefix = header.prefix
    if isinstance(nodes, History):
        messages = concat_frozen(prefix, _head(nodes.messages, len(nodes)))
        seqs: tuple[int | None, ...] = (None,) * len(prefix) + tuple(_head(nodes.seqs, len(nodes)))
    else:
        messages = concat_frozen(prefix, map(itemgetter(1), nodes))
        seqs = (*((None,) * len(prefix)), *map(itemgetter(0), nodes))
    request = LlmRequest(
        header=header,
        messages=messages,
        node_seqs=seqs,
        session_id=session_id,
        boundary_seq=boundary_seq,
        one_shot=one_shot,
    )
    if isinstance(nodes, History):
        object.__setattr__(request, "history", nodes)
    return request


def _head(items: list[Any], count: int) -> Iterable[Any]:
    """The first ``count`` items, without a copy when that is all of them."""
    return items if len(items) == count else islice(items, count)


def instruction_message(instruction: str) -> FrozenDict:
    """The user message a one-shot call ends with."""
    message: FrozenDict = freeze_faithful(
        {"role": "user", "content": [{"type": "text", "text": instruction}]}
    )
    return message


def summary_request(
    *,
    header: EpochHeader,
    nodes: Iterable[tuple[int, FrozenDict]],
    region: Sequence[int],
    instruction: str,
    max_tokens: int,
    session_id: str | None,
    anchor_seq: int | None,
) -> LlmRequest:
    """The one-shot compaction summary: the conversation up to the cut, as the
    loop sent it, plus the instruction.

    Same system, tools, prefix and messages in the same order, so the request
    is a prefix of the loop's own requests and reuses their cached prefix; only
    ``max_tokens`` differs, and the body fields that would force a JSON answer
    or a tool call are left out (:func:`_free_text`). ``nodes`` is the
    projection at the ``compact/start`` that logged ``region``, ``instruction``
    and ``max_tokens``.
    """
    shadowed = set(region)
    kept = [(seq, m) for seq, m in nodes if seq in shadowed]
    config = _free_text(header.config).replace(max_tokens=max_tokens)
    ask = instruction_message(instruction)
    return LlmRequest(
        header=EpochHeader(
            config=config, system=header.system, tools=header.tools, prefix=header.prefix
        ),
        messages=concat_frozen(header.prefix, (m for _, m in kept), (ask,)),
        node_seqs=(*(None for _ in header.prefix), *(s for s, _ in kept), None),
        session_id=session_id,
        boundary_seq=anchor_seq,
        one_shot=True,
    )


def _forces(choice: Any) -> bool:
    """Whether a ``tool_choice`` forces a tool call (OpenAI ``required`` or a named
    function; Anthropic ``any`` or a named tool), rather than allowing or forbidding one."""
    kind = choice.get("type") if isinstance(choice, Mapping) else choice
    return kind in ("required", "any", "tool", "function")


def _free_text(config: LlmCallConfig) -> LlmCallConfig:
    """``config`` without the body fields that force the answer's shape.

    A summary is free text: a ``response_format`` or a forcing ``tool_choice``
    (what a structured turn adds, docs/providers.md "Structured output") would
    make it JSON or a tool call. Unchanged (the same object) when it has none.
    """
    extras = config.extras
    dropped = [k for k in ("response_format", "tool_choice") if k in extras]
    dropped = [k for k in dropped if k == "response_format" or _forces(extras[k])]
    if not dropped:
        return config
    return config.replace(extras={k: v for k, v in extras.items() if k not in dropped})


def compaction_inputs(data: Mapping[str, Any]) -> tuple[list[int], str, int] | None:
    """``(region, instruction, max_tokens)`` of a ``compact/start`` payload that
    sends a summary request, or ``None`` (nothing to compact: no request)."""
    region = data.get("region")
    if not region:
        return None
    return list(region), data["instruction"], data["max_tokens"]
