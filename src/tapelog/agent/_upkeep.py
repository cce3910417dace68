"""Keeping the context in bounds: trimming, metering and compacting between steps.

The part of :class:`~tapelog.agent.Agent` that decides, before each step, how
much of the history the next request carries: old tool results are trimmed
(:mod:`._trimming`), the next request's weight is metered (:mod:`._context_meter`),
and history is summarised (:mod:`._compaction`) when it passes the policy's
threshold, on a context overflow, or when asked (``agent.compact()``). It is
kept apart from the loop (:mod:`._loop`) so that the loop module holds the
turn and its steps only; it is a mixin because ``compact`` and
``context_tokens`` are public methods of the agent and share its session,
client and durability point.
"""

from __future__ import annotations

import asyncio
from typing import Any

from tapelog.agent._compaction import CompactionPolicy, CompactionResult, compact
from tapelog.agent._context_meter import ContextMeter
from tapelog.agent._trimming import Trimmer
from tapelog.checker._api import RequestChecker
from tapelog.llm import ProviderClient
from tapelog.llm._api import AbortHandle, BodyCache, estimate_tokens
from tapelog.log._api import EpochHeader, FrozenList, LlmCallConfig, Session
from tapelog.request import build_request

__all__ = ["ContextUpkeep"]


class ContextUpkeep:
    """Trimming and compaction between steps; the agent provides what it reads."""

    session: Session
    client: ProviderClient
    system: str | None
    compaction: CompactionPolicy
    _body_cache: BodyCache
    _trimmer: Trimmer
    _meter: ContextMeter
    _abort: AbortHandle | None
    _turn_task: asyncio.Task[Any] | None

    @property
    def config(self) -> LlmCallConfig:
        raise NotImplementedError  # the agent's; here for typing

    async def _compose_prefix(self) -> FrozenList:
        raise NotImplementedError  # the agent's; here for typing

    def _tool_schemas(self) -> list[Any]:
        raise NotImplementedError  # the agent's; here for typing

    def _checker_for(self) -> RequestChecker | None:
        raise NotImplementedError  # the agent's; here for typing

    async def _flush(self) -> None:
        raise NotImplementedError  # the agent's; here for typing

    async def _current_header(self) -> EpochHeader:
        """The header the next request would carry (before the request hook)."""
        prefix = await self._compose_prefix()
        return EpochHeader(
            config=self.config,
            system=self.system,
            tools=self._tool_schemas(),
            prefix=prefix,
        )

    async def context_tokens(self) -> int:
        """Estimated tokens of the next request.

        The last reported prompt + output tokens plus an estimate of the
        messages appended since (O(new)); a full estimate of the would-be body
        when there is no usable report (none yet, or history was replaced).
        """
        return await self._meter.tokens(self.session, self._whole_body_tokens)

    async def _whole_body_tokens(self) -> int:
        header = await self._current_header()
        nodes = self.session.history()
        request = build_request(header=header, nodes=nodes, session_id=None, boundary_seq=None)
        body: bytes = self.client.wire.encode_body(request, cache=self._body_cache)
        return estimate_tokens(body)

    async def compact(
        self, *, trigger: str = "manual", turn: int | None = None
    ) -> CompactionResult:
        """Summarise old history now (see :mod:`tapelog.agent._compaction`).

        The summary call carries the last logged request header, so it is
        rebuilt from the log (``tapelog requests --one-shot``) and checked like
        a loop request.

        Called outside this agent's own turn (``/compact`` in chat), it claims
        the session like a turn does: it is refused while a turn runs on it.
        """
        if self._turn_task is not None and self._turn_task is asyncio.current_task():
            return await self._compact(trigger=trigger, turn=turn)
        with self.session.running("compaction"):
            return await self._compact(trigger=trigger, turn=turn)

    async def _compact(self, *, trigger: str, turn: int | None) -> CompactionResult:
        result = await compact(
            self.session,
            self.client,
            self.compaction,
            trigger=trigger,
            turn=turn,
            context_tokens=await self.context_tokens(),
            checker=self._checker_for(),
            flush=self._flush,
            abort=self._abort,
        )
        await self._flush()
        return result

    async def _between_steps(self, turn: int) -> None:
        """Trim old tool results and compact when the context is too full."""
        self._trimmer.trim(self.session)
        window = self.compaction.context_window
        if window is not None and await self.context_tokens() > self.compaction.threshold * window:
            await self.compact(trigger="auto", turn=turn)
