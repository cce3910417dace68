"""The agent loop: turns and steps whose every request is a function of the log.

Per step (docs/architecture.md, "The loop"): compose the session prefix once
per loop instance and run ``pre_step``; snapshot the messages and append
``step/start`` in one synchronous frame (the reconstruction boundary); pass
the config seed (explicit options on the instance's first request and after
``agent.config`` was set, the folded header's otherwise) through the
``request`` hook; compose the header, check the client speaks the config's
wire, build and encode the request and log the header. The invariant checker
rebuilds the request from the log, the store is flushed (in a worker thread,
awaited: other tasks of the event loop run meanwhile), and only then are the
bytes sent. Anything that stops a step between its ``step/start`` and the send
ends it with ``step/end {"sent": false}``, so the rebuild skips it. Stream,
logging chunks and exactly one ``assistant/message``; run tools, logging
``tool/call`` before and ``tool/result`` after, in the model's order; context
injected while the step is in flight waits for its results. Trimming and
compaction between steps are :mod:`tapelog.agent._upkeep`'s.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

from tapelog._errors import Aborted, ContextOverflowError, ProviderError
from tapelog.agent._approval import ApprovalGate, Approver
from tapelog.agent._budget import Budget, BudgetGuard
from tapelog.agent._compaction import CompactionPolicy
from tapelog.agent._context_meter import ContextMeter
from tapelog.agent._flushing import flush_off_loop
from tapelog.agent._hooks import Hooks, StepContext, call_hook, request_config, text_blocks
from tapelog.agent._model_string import resolve_target
from tapelog.agent._output import OutputRun, OutputType, output_toolset, shape_request
from tapelog.agent._persistent import StoredSessionOwner
from tapelog.agent._reply import (
    ReplySources,
    StepRef,
    log_attempt_error,
    log_reply,
    send_with_retries,
)
from tapelog.agent._runtime_context import ContextSource, ContextWatcher
from tapelog.agent._step_end import StepInFlight
from tapelog.agent._stream import StreamEvent, stream_turn
from tapelog.agent._sync import SyncRunner
from tapelog.agent._tool_calls import run_tool_calls
from tapelog.agent._tools import Tool, Toolset, ToolSource
from tapelog.agent._trimming import Trimmer, TrimPolicy
from tapelog.agent._turn import (
    Flushable,
    Outcome,
    RetryPolicy,
    TurnResult,
    checked_config,
    final_text,
    last_turn,
    sum_usage,
    turn_reason,
)
from tapelog.agent._upkeep import ContextUpkeep
from tapelog.checker._api import RequestChecker, check_enabled
from tapelog.llm import LlmRequest, ProviderClient
from tapelog.llm._api import AbortHandle, BodyCache, WireBody, client_wire, encode_wire_body
from tapelog.log._api import (
    EpochHeader,
    Event,
    FrozenList,
    HeaderRecorder,
    LlmCallConfig,
    Session,
    freeze,
    repair_interrupted,
)
from tapelog.request import build_request

__all__ = ["Agent"]

_USER_SOURCE = freeze({"kind": "user"})
"""The ``source`` of a prompt: one frozen object shared by every user message
(issue 20: no copy per message)."""


class Agent(StoredSessionOwner, ContextUpkeep):
    """A tool-using agent over a :class:`Session` (one instance = one loop instance).

    ``check`` turns the invariant checker on or off (default: on, unless
    ``TAPELOG_CHECK`` says ``0``/``off``); it rebuilds every request from the
    log before it is sent, at a cost proportional to what is new. ``context``
    sources (:class:`RuntimeContext`) put their values in the session prefix
    and log a watched value's change as a ``context/message`` (never the system prompt).

    ``Agent("openai:gpt-4.1-mini")`` (or ``model=`` beside a session) makes the
    client and config from a model string (:mod:`tapelog.agent._model_string`);
    :meth:`open` creates or resumes a stored session in one call.
    """

    def __init__(
        self,
        session: Session | str | None = None,
        client: ProviderClient | None = None,
        *,
        config: LlmCallConfig | None = None,
        model: str | None = None,
        system: str | None = None,
        tools: Toolset | Iterable[Tool | ToolSource] = (),
        tool_order: Sequence[str] | None = None,
        hooks: Hooks | None = None,
        writer: Flushable | None = None,
        retry: RetryPolicy | None = None,
        max_steps: int = 32,
        check: bool | None = None,
        compaction: CompactionPolicy | None = None,
        trimming: TrimPolicy | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        context: Iterable[ContextSource] = (),
        deps: Any = None,
        budget: Budget | None = None,
        approver: Approver | None = None,
    ) -> None:
        session, client, config = resolve_target(session, client, config, model)
        self.session = session
        self.client = client
        self._config = checked_config(config)
        self._config_explicit = True  # the next request starts from _config
        self.system = system
        self.tools = tools if isinstance(tools, Toolset) else Toolset(tools)
        self.tool_order = list(tool_order) if tool_order is not None else None
        self.hooks = hooks or Hooks()
        self.writer = writer
        self.deps = deps  # handed to tools that declare a RunContext; never logged
        self.approver = approver  # decides on calls of tools that require approval
        self._budget = BudgetGuard(budget, self._config)  # checked before each request
        self.retry = retry or RetryPolicy()
        self.max_steps = max_steps
        self.check = check_enabled(check)
        # Made now, while a resumed session holds only what its log said, so the
        # checker starts from the load's fold (RequestChecker, Session.shadow_fold).
        self._checker = RequestChecker(session) if self.check else None
        self._sleep = sleep
        self._recorder = HeaderRecorder(session)
        self._prefix: FrozenList | None = None
        self._context_sources = ContextWatcher(context)  # runtime context: prefix + changes
        self._abort: AbortHandle | None = None
        self._output: OutputRun | None = None  # the structured output of the turn in flight
        self._in_flight = StepInFlight(session)  # the step in flight; inject() waits for its end
        self._turn_task: asyncio.Task[Any] | None = None  # the task running this agent's turn
        self._last_result: TurnResult | None = None  # of the last turn that logged its end
        self._sync = SyncRunner()  # run_sync's private event loop
        self._replies = ReplySources()
        # Reuse the client's per-node cache when it has one: one encode per node.
        cache = getattr(client, "cache", None)
        self._body_cache = cache if isinstance(cache, BodyCache) else BodyCache()
        self.repaired: list[Event] = repair_interrupted(session)
        self._turn = sum(1 for t in session.events.types() if t == "turn/start")
        self.compaction = compaction or CompactionPolicy()
        self._trimmer = Trimmer(trimming or TrimPolicy())
        self._meter = ContextMeter()  # what the next request weighs, for compaction

    # --- public controls -----------------------------------------------------

    @property
    def config(self) -> LlmCallConfig:
        """The call config the next request starts from (before the ``request`` hook).

        The explicit options until the first request of this loop instance, and
        after each assignment; the folded header's config otherwise. Assigning
        takes effect at the next step, logged as a header delta like a change
        of ``system`` or ``tools``. The fields structured output adds to a
        request (``response_format``, ``tool_choice``) are never part of it.
        """
        folded = self.session.header
        if self._config_explicit or folded is None:
            return self._config
        return folded.config

    @config.setter
    def config(self, value: LlmCallConfig) -> None:
        self._config = checked_config(value)
        self._config_explicit = True

    def inject(
        self, text: str | Sequence[Mapping[str, Any]], *, kind: str = "inject"
    ) -> Event | None:
        """Add model-visible context as a ``context/message``; it joins the next
        request built after it is logged.

        While a step is in flight the message waits until the step's tool
        results are logged (a message between a tool call and its result makes
        every later request invalid), and ``None`` is returned; otherwise it is
        logged at once and the event returned. The text is validated now either way.
        """
        content = text_blocks(text) if isinstance(text, str) else freeze(list(text))
        return self._in_flight.offer(content, kind)

    def abort(self, reason: str = "user") -> None:
        """Abort the step in flight (stream or tools); the turn ends as ``aborted``."""
        if self._abort is not None:
            self._abort.abort(reason)

    def add_tool(self, tool: Tool) -> None:
        """Register a tool; the next request's header carries it (a header delta)."""
        self.tools.add(tool)

    def remove_tool(self, name: str) -> None:
        self.tools.remove(name)

    # --- the loop ------------------------------------------------------------

    async def _flush(self) -> None:
        """Make the log durable without holding the event loop (:mod:`._flushing`)."""
        if self.writer is not None:
            await flush_off_loop(self.writer)

    async def run(
        self,
        prompt: str | Sequence[Mapping[str, Any]],
        *,
        output_type: OutputType | None = None,
        idempotency_key: str | None = None,
    ) -> TurnResult:
        """Run one turn: the prompt, then steps until the model stops calling tools.

        With ``output_type`` (a pydantic model class, a JSON schema dict or an
        :class:`OutputSpec`) the answer must match its schema and
        ``TurnResult.output`` is the validated value (see :mod:`tapelog.agent._output`).
        ``idempotency_key`` is logged with the prompt's ``user/message``, so a
        caller that may run the same request twice (a durable queue recovering
        a turn, :mod:`tapelog.dbos`) finds in the log whether it already was.
        """
        # Built (and so validated) first: a prompt that is not lossless JSON is
        # refused before anything is logged, not after an opened turn.
        content = text_blocks(prompt) if isinstance(prompt, str) else freeze(list(prompt))
        if idempotency_key is not None and not (
            idempotency_key and isinstance(idempotency_key, str)
        ):
            raise TypeError("idempotency_key must be a non-empty string")
        return await self._one_turn(content, output_type, idempotency_key)

    async def continue_turn(self, *, output_type: OutputType | None = None) -> TurnResult:
        """Run one turn with no new prompt: the model answers the log as it stands.

        How an interrupted turn goes on (repair closed its step, answering a tool
        call left without a result by an error result): the model decides what
        to do about it, e.g. call the tool again; nothing is re-run behind its back.
        """
        return await self._one_turn(None, output_type, None)

    async def _one_turn(self, content: Any, output_type: Any, key: str | None) -> TurnResult:
        output = None
        if output_type is not None:  # checked before anything is logged, like the prompt
            output = OutputRun.create(output_type, self.config, self.tools)
        # One turn at a time per session, whichever Agent runs it: a second
        # concurrent run raises here, before anything is logged.
        with self.session.running("turn"):
            self._turn_task, self._output = asyncio.current_task(), output
            try:
                return await self._run(content, key)
            finally:
                self._turn_task = self._output = None

    def stream(
        self, prompt: str | Sequence[Mapping[str, Any]], **options: Any
    ) -> AsyncGenerator[StreamEvent, None]:
        """Run one turn (as :meth:`run`, same options) and yield its events as
        they are logged, :class:`TurnEnd` last (see :mod:`tapelog.agent._stream`).
        Closing the stream before its end aborts the turn."""
        return stream_turn(self, lambda: self.run(prompt, **options))

    def run_sync(self, prompt: str | Sequence[Mapping[str, Any]], **options: Any) -> TurnResult:
        """:meth:`run` from synchronous code, on this agent's own event loop
        (see :mod:`tapelog.agent._sync`); refused inside a running event loop."""
        return self._sync.run(lambda: self.run(prompt, **options), "await agent.run(...)")

    async def _run(self, content: Any, key: str | None = None) -> TurnResult:
        """One turn; ``content`` ``None``: no prompt (:meth:`continue_turn`)."""
        session = self.session
        # Another Agent may have run turns on this session since this one was made.
        self._turn = max(self._turn, last_turn(session)) + 1
        turn = self._turn
        session.append("turn/start", {"turn": turn})
        if content is not None:
            prompt: dict[str, Any] = {"content": content, "source": _USER_SOURCE}
            if key is not None:
                prompt["idempotency_key"] = key
            session.append("user/message", prompt, surface_op="append")
        # One abort handle per turn: an abort between steps (or while a step's
        # request is being prepared) is not lost.
        self._abort = AbortHandle()
        outcome = Outcome(turn=turn)
        try:
            extra = None if content is None else await call_hook(self.hooks.prompt_submit, content)
            if extra:
                self.inject(extra, kind="prompt-submit")
            if self._output is not None:
                self._output.begin(session)  # the instruction its mode needs, if any
            return await self._steps(outcome)
        except Aborted:
            self._close_step()
            return await self._end(outcome, {"kind": "aborted", "by": self._abort_reason()})
        except ProviderError as exc:
            self._close_step()
            error: dict[str, Any] = {"type": type(exc).__name__, "message": str(exc)}
            if exc.status is not None:
                error["status"] = exc.status
            return await self._end(outcome, {"kind": "error", "error": error})
        except BaseException as exc:
            self._close_step()
            await self._end(
                outcome,
                {"kind": "error", "error": {"type": type(exc).__name__, "message": str(exc)}},
                failing=True,
            )
            raise
        finally:
            self._abort = None

    async def _steps(self, outcome: Outcome) -> TurnResult:
        """Steps until the turn ends; its result."""
        turn, handle = outcome.turn, self._abort
        assert handle is not None
        overflowed = False
        while True:
            outcome.steps += 1
            step = outcome.steps
            if handle.aborted:
                raise Aborted()
            if step > self.max_steps:
                outcome.steps -= 1
                return await self._end(outcome, {"kind": "max_steps", "limit": self.max_steps})
            if (spent := self._budget.over(self.session, turn)) is not None:
                outcome.steps -= 1
                return await self._end(outcome, spent)
            await self._between_steps(turn)
            try:
                message, finish = await self._step(turn, step)
            except ContextOverflowError as exc:
                if overflowed or not self.compaction.on_overflow:
                    raise
                overflowed = True
                log_attempt_error(StepRef(self.session, turn, step), exc, attempt=1, overflow=True)
                self._close_step()
                result = await self.compact(trigger="overflow", turn=turn)
                if not result.ok:
                    raise
                continue
            sum_usage(outcome.usage, message.data.get("usage"))
            self._meter.remember(self.session, message)
            outcome.text = final_text(message.data["content"]) or outcome.text
            calls = [b for b in message.data["content"] if b["type"] == "tool_call"]
            if calls and finish != "max_tokens":
                await self._run_tools(turn, step, calls)
            self._close_step()
            reason = turn_reason(finish, calls)
            if self._output is not None:
                reason = self._output.after_step(self.session, outcome, message, reason)
            if reason is not None:
                return await self._end(outcome, reason)

    def _abort_reason(self) -> str:
        return (self._abort.reason if self._abort else None) or "user"

    def _close_step(self, *, sent: bool = True, error: BaseException | str | None = None) -> None:
        """End the open step, if any (see :mod:`tapelog.agent._step_end`)."""
        self._in_flight.close(self.config, sent=sent, error=error)

    async def _end(
        self, outcome: Outcome, reason: Mapping[str, Any], *, failing: bool = False
    ) -> TurnResult:
        """Log the turn's end (once, even if its flush failed or was cancelled and
        the turn ends again by that exception) and make it durable before the
        turn returns, off the event loop; ``failing`` (the turn ends by an
        exception) flushes on this thread (see :mod:`tapelog.agent._flushing`)."""
        result = outcome.result
        if result is None:
            event = self.session.append("turn/end", {"turn": outcome.turn, "reason": reason})
            self._last_result = result = outcome.result = TurnResult(
                turn=outcome.turn,
                reason=event.data["reason"],
                text=outcome.text,
                steps=outcome.steps,
                usage=outcome.usage,
                output=outcome.output,
            )
        if self.writer is not None and failing:
            self.writer.flush()  # no await that a second cancellation could cut short
        elif self.writer is not None:
            await flush_off_loop(self.writer)
        return result

    async def _compose_prefix(self) -> FrozenList:
        if self._prefix is None:
            seed = await self._context_sources.seed(self.session)
            prefix = await call_hook(self.hooks.session_prefix, seed)
            self._prefix = freeze([*seed, *(prefix or ())], path="prefix")
        return self._prefix

    def _tool_schemas(self) -> list[Any]:
        return list(self.tools.schemas(self.tool_order))

    def _checker_for(self) -> RequestChecker | None:
        if not self.check:
            return None
        if self._checker is None:
            self._checker = RequestChecker(self.session)
        return self._checker

    async def _prepare(self, turn: int, step: int) -> tuple[LlmRequest, WireBody]:
        """Everything up to the send; the request and its body (the wire's parts,
        never joined here: the edge streams them).

        Anything that fails after ``step/start`` ends the step as not sent.
        """
        prefix = await self._compose_prefix()
        await call_hook(self.hooks.pre_step, StepContext(turn=turn, step=step, prefix=prefix))
        await self._context_sources.report_changes(self.session)  # joins this step's request
        await self.tools.refresh()  # dynamic tools (MCP servers) settle their lists first
        session = self.session
        # The snapshot and step/start share one synchronous frame: nothing can
        # slip between them, so the boundary is exactly this step/start.
        nodes = session.history()
        self._in_flight.begin(self.config)
        try:
            boundary = session.append("step/start", {"turn": turn, "step": step})
            config = self._in_flight.config = await request_config(self.hooks, self.config)
            shaped, tools = shape_request(
                self._output, config, self._tool_schemas(), session.header
            )
            offered = EpochHeader(config=shaped, system=self.system, tools=tools, prefix=prefix)
            wire = client_wire(self.client, shaped, checked=self.check)
            # Offered -> logged -> folded -> sent: the request carries the header as
            # the session's fold returns it, never the value offered to the log.
            self._recorder.record(offered)
            header = session.header
            assert header is not None, "the recorder has just logged a header"
            request = build_request(
                header=header, nodes=nodes, session_id=session.id, boundary_seq=boundary.seq
            )
            body = encode_wire_body(wire, request, cache=self._body_cache)
            self._config_explicit = False
            if shaped is not config:  # the next seed is the config before output shaping
                self._config, self._config_explicit = config, True
            checker = self._checker_for()
            if checker is not None:
                checker.check(request, body)
            await self._flush()  # durable before the bytes leave; a failure: not sent
        except BaseException as exc:
            self._close_step(sent=False, error=exc)
            raise
        return request, body

    async def _step(self, turn: int, step: int) -> tuple[Event, str]:
        request, body = await self._prepare(turn, step)
        handle = self._abort
        assert handle is not None, "a step runs inside a turn"
        if handle.aborted:
            self._close_step(sent=False, error="aborted before the request was sent")
            raise Aborted()
        where = StepRef(self.session, turn, step)
        chunks = await send_with_retries(
            where, self.client, request, body, handle, self.retry, self._sleep, self._flush
        )
        return log_reply(where, chunks, handle, self._replies.source(request.config))

    async def _run_tools(self, turn: int, step: int, calls: Sequence[Mapping[str, Any]]) -> None:
        handle = self._abort
        assert handle is not None
        contexts, aborted = await run_tool_calls(
            self.session,
            output_toolset(self._output, self.tools),
            self.hooks,
            handle,
            turn=turn,
            step=step,
            calls=calls,
            flush=self._flush,
            deps=self.deps,
            gate=ApprovalGate(self.approver, self.tools),
        )
        for text in contexts:
            self.inject(text, kind="tool-post-execute")
        if aborted:
            raise Aborted()
