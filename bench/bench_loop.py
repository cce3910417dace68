"""Benchmark of the agent loop's own cost and of cache efficiency; prints one JSON object.

    .venv/bin/python bench/bench_loop.py [--wire openai|anthropic|responses]

``--wire`` picks the body the loop encodes at the edge: ``openai`` (the
default: the DeepSeek dialect of the OpenAI-compatible wire), ``anthropic``
(the Anthropic Messages wire, with its grouping and cache breakpoints) or
``responses`` (the OpenAI Responses API: ``provider="openai"`` with
``config.wire.api = "responses"``; each reply also carries a reasoning item
with a 400-character ``encrypted_content``, sent back on every later request).
The output names it (``wire``); ``demo_cache`` is the demo's own workload either way.

``loop``: what a step costs the loop itself, everything but the provider.
  The real :class:`tapelog.agent.Agent` (``check=False``) drives one growing
  session of 1,000+ steps against :class:`InstantClient`, a provider client at
  the edge that yields canned, pre-frozen chunks at once (a little text, a tool
  call on the first two steps of each three-step turn, usage, finish). So the
  measured time is the loop's work alone: projection, header diff, request
  build and freeze, per-node body encode with the client's ``BodyCache``,
  logging chunks, the assistant message, ``tool/call`` / ``tool/result`` and
  running the (trivial) tool. Step N's time is from its ``pre_step`` hook to
  the next step's (N = 10, 100 and 1,000 are all the first, tool-calling step
  of a turn, so the interval holds one whole step and nothing else). The
  session is run ``RUNS`` times from scratch and each step's best time is kept
  (the machine is shared). For the same step the request that was sent is
  serialised again with a plain ``wire.encode_body(request)`` (no cache, best
  of ``ENCODE_REPEATS``): ``ratio`` is step time ÷ that full encode, so a ratio
  that falls as history grows shows a step costs what is new, not the
  history. ``prepare_us`` is the part of the step before the request reaches
  the edge (prefix, snapshot, ``step/start``, header, build, freeze, encode);
  ``cached_assembly_us`` is ``encode_body`` of the same request when every
  node's piece is already in a ``BodyCache`` (a fresh run: it still visits
  each node once and joins the pieces into one ``bytes``, so it grows with
  history; the loop itself reuses the last step's run and joins nothing).
  ``turn_avg_step_us`` smooths one-step noise: the wall time of the
  ``WINDOW`` turns around step N divided by their steps (turn start and end
  included). ``flatness_1000_over_10`` is the ratio of those per-step times
  (and of ``step_us``) at 1,000 and 10 steps; ``provider_us`` is what
  iterating a canned stream costs with nobody logging it.

``checker``: what the invariant checker costs. The same session is grown to
  10,000 history messages with ``check=False`` and with ``check=True`` (best of
  ``CHECK_RUNS`` runs each), and the per-step time (the ``WINDOW`` turns around
  the first step of a turn with at least 100, 1,000 and 10,000 messages) is
  reported for both, with ``on_over_off`` (the checker's share) and the
  flatness of each from 100 to 10,000 messages. The body (2.3 MB at 10,000
  messages here, 6 MB on the Responses wire) is never joined: the loop hands
  the edge its parts (``WireBody``), and the checker compares only the parts
  it has not verified before. What still grows is a few C-level copies of the
  history's lists (the request's messages and node seqs, for the loop and for
  the checker's rebuild) and the memory effects of a larger heap.

``demo_cache``: cached-token efficiency on the ``tapelog demo`` workload. The
  demo's own session (``tapelog.cli._demo``: its SCRIPT, PROMPTS, the
  ``word_count`` tool registered before the second turn and the loop restart
  before the third) runs on the in-process emulator (DeepSeek rule: 64-token
  units) into a temporary store. Then, from the stored log alone: each request
  is rebuilt and rendered into the emulator's cache segments (its public
  ``openai_sources`` / ``chain_segments`` and the same token estimate). The
  most any client could have had cached for request i, given what the log
  changed, is the longest segment prefix it shares with an earlier request's
  prompt followed by that request's logged reply (rendered as the wire sends
  it back), rounded down to whole 64-token units (DeepSeek stores the prompt
  and the prompt + output; a prefix is matched whole-segment). ``efficiency``
  is the cached tokens the emulator reported ÷ the sum of those bounds.
  Only a loop that re-encoded history differently, or dropped or reordered
  anything, can score below 1; logged changes (a tool added to the header,
  which the OpenAI wire sends before the messages) lower the bound itself and
  are listed per request.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from rich.console import Console

from tapelog.agent import Agent, Hooks, StepContext, tool
from tapelog.audit import encode_request, rebuild_requests
from tapelog.cache._api import Segment, chain_segments, openai_sources
from tapelog.cli._demo import _run_demo
from tapelog.llm import LlmRequest
from tapelog.llm._api import (
    AbortHandle,
    AnthropicWire,
    BodyCache,
    OpenAIWire,
    ResponsesWire,
    WireBody,
)
from tapelog.llm._types import normalise_usage
from tapelog.log import decode
from tapelog.log._api import (
    FrozenDict,
    LlmCallConfig,
    Session,
    derive_event_message,
    encode_str,
    freeze,
)
from tapelog.store import JsonlStore

STEPS = (10, 100, 1_000)
STEPS_PER_TURN = 3  # two tool-calling steps, then a text answer
RUNS = 5
ENCODE_REPEATS = 30
WINDOW = 5  # turns averaged around each measured step
DEEPSEEK_UNIT = 64
WIRES = ("openai", "anthropic", "responses")
CHECK_MESSAGES = (100, 1_000, 10_000)  # history sizes for the checker's cost
CHECK_RUNS = 3
# Per wire: the provider the config names and the model it asks for.
_TARGETS = {
    "openai": ("deepseek", "deepseek-chat"),
    "anthropic": ("anthropic", "claude-sonnet-4-5"),
    "responses": ("openai", "gpt-5-mini"),
}
_WIRE_OPTIONS = {"responses": {"api": "responses"}}  # config.wire per bench wire

SYSTEM = "\n".join(
    f"Rule {i}: read the relevant file before answering and cite what you read." for i in range(40)
)
_LOREM = (
    "The session log is the single source of truth; every request is a pure "
    "function of it, so a prompt cache hits by construction. "
)


def _text(n: int) -> str:
    return (_LOREM * (n // len(_LOREM) + 1))[:n]


@tool
def lookup(key: str) -> str:
    """Look a key up in the project notes.

    Args:
        key: The note to read.
    """
    return f"{key}: " + _text(400)


@tool
def word_count(text: str) -> int:
    """Count the words of a text.

    Args:
        text: Any text.
    """
    return len(text.split())


# --- the loop ----------------------------------------------------------------


def _reasoning_item(step: int) -> list[dict[str, Any]]:
    """A Responses reasoning item as the stream parser emits it: summary text,
    then the done item's fields (the encrypted content goes back every request)."""
    summary = f"Step {step}: look up the note."
    item = {
        "id": f"rs_{step}",
        "summary": [{"type": "summary_text", "text": summary}],
        "encrypted_content": "gAAAAB" + f"{step:08d}" * 49 + "==",
    }
    return [
        {"kind": "reasoning", "text": summary, "index": 0},
        {"kind": "reasoning_item", "index": 0, "item": item},
    ]


def _canned(step: int, wire: str) -> list[FrozenDict]:
    """The chunks of global step ``step`` (1-based): tool steps, then an answer."""
    chunks: list[dict[str, Any]] = _reasoning_item(step) if wire == "responses" else []
    position = (step - 1) % STEPS_PER_TURN
    if position < STEPS_PER_TURN - 1:
        chunks.append({"kind": "text", "text": "Let me look that up."})
        arguments = f'{{"key": "note-{step}"}}'
        chunks.append({"kind": "tool_call", "index": 0, "id": f"call_{step}", "name": "lookup"})
        chunks += [
            {"kind": "tool_call", "index": 0, "arguments": arguments[i : i + 8]}
            for i in range(0, len(arguments), 8)
        ]
        finish = "tool_calls"
    else:
        answer = _text(240)
        chunks += [{"kind": "text", "text": answer[i : i + 24]} for i in range(0, 240, 24)]
        finish = "stop"
    usage = normalise_usage(input=100, cache_read=64 * step, output=60)
    chunks.append({"kind": "usage", "usage": usage})
    chunks.append({"kind": "finish", "reason": finish, "raw": finish})
    frozen: list[FrozenDict] = [freeze(c) for c in chunks]
    return frozen


Wire = OpenAIWire | AnthropicWire | ResponsesWire


def _wire(name: str) -> Wire:
    if name == "openai":
        return OpenAIWire(dialect="deepseek")
    return AnthropicWire() if name == "anthropic" else ResponsesWire()


class InstantClient:
    """A provider at the edge that answers every request at once from canned chunks.

    It keeps each request's message count (``sizes``) and only the requests
    named in ``keep`` (by index): a provider keeps nothing, and keeping every
    request of a 5,000-step session would hold some fifty million list and
    tuple slots (each request's messages and node seqs) that the
    garbage collector walks on each full collection, a cost of the harness
    that grows with the history and is no part of the loop's.
    """

    def __init__(self, steps: int, wire: str, keep: frozenset[int] = frozenset()) -> None:
        self.provider = _TARGETS[wire][0]
        self.wire: Wire = _wire(wire)
        self.cache = BodyCache()  # the Agent adopts it: one encode per surface node
        self.replies = [_canned(step, wire) for step in range(1, steps + STEPS_PER_TURN + 1)]
        self.keep = keep
        self.requests: dict[int, LlmRequest] = {}  # the kept ones, by index
        self.sizes: list[int] = []  # every request's message count
        self.called: list[float] = []  # when each request reached the edge

    async def stream(
        self, request: LlmRequest, *, abort: AbortHandle, body: bytes | WireBody | None = None
    ) -> AsyncIterator[FrozenDict]:
        self.called.append(time.perf_counter())
        index = len(self.sizes)
        self.sizes.append(len(request.messages))
        if index in self.keep:
            self.requests[index] = request
        for chunk in self.replies[index]:
            yield chunk


async def _grow(
    total_steps: int, wire: str, *, check: bool = False, keep: frozenset[int] = frozenset()
) -> tuple[list[float], list[tuple[float, float, int]], InstantClient]:
    """One session of ``total_steps`` steps: step start times and per-turn spans
    (the requests of the steps in ``keep``, 0-based, are kept on the client)."""
    marks: list[float] = []
    turns: list[tuple[float, float, int]] = []
    client = InstantClient(total_steps, wire, keep)

    def pre_step(ctx: StepContext) -> None:
        marks.append(time.perf_counter())

    provider, model = _TARGETS[wire]
    config = LlmCallConfig(
        provider=provider, model=model, max_tokens=1024, wire=_WIRE_OPTIONS.get(wire, {})
    )
    agent = Agent(
        Session(),
        client,
        config=config,
        system=SYSTEM,
        tools=[lookup, word_count],
        hooks=Hooks(pre_step=pre_step),
        check=check,
        max_steps=STEPS_PER_TURN,
    )
    turn = 0
    while len(marks) < total_steps:
        turn += 1
        started = time.perf_counter()
        result = await agent.run(f"Question {turn}: " + _text(200))
        turns.append((started, time.perf_counter(), result.steps))
        assert result.reason["kind"] == "completed", result.reason
    marks.append(time.perf_counter())  # the end of the last turn closes the last step
    return marks, turns, client


def _best_encode(wire: Wire, request: LlmRequest, cache: BodyCache | None = None) -> float:
    best = float("inf")
    for _ in range(ENCODE_REPEATS):
        started = time.perf_counter()
        wire.encode_body(request, cache=cache)
        best = min(best, time.perf_counter() - started)
    return best


def _best_cached_encode(wire: Wire, request: LlmRequest) -> float:
    """Assembling the body when every node's piece is already cached."""
    cache = BodyCache()
    wire.encode_body(request, cache=cache)
    return _best_encode(wire, request, cache)


async def _provider_cost(client: InstantClient, request: LlmRequest) -> float:
    """Iterating one canned stream with nobody logging it (the edge's own cost)."""
    best = float("inf")
    for _ in range(ENCODE_REPEATS):
        client.sizes.clear()
        started = time.perf_counter()
        async for _chunk in client.stream(request, abort=AbortHandle()):
            pass
        best = min(best, time.perf_counter() - started)
    return best


def bench_loop(wire: str = "openai") -> dict[str, Any]:
    total = max(STEPS) + STEPS_PER_TURN * (WINDOW // 2 + 1)
    keep = frozenset({0, *(n - 1 for n in STEPS)})
    runs = [asyncio.run(_grow(total, wire, keep=keep)) for _ in range(RUNS)]
    out: dict[str, Any] = {"wire": wire, "runs": RUNS, "steps_per_turn": STEPS_PER_TURN}
    last_client = runs[-1][2]
    per_size: dict[str, Any] = {}
    for n in STEPS:
        assert (n - 1) % STEPS_PER_TURN == 0, "measure the first (tool) step of a turn"
        step = min(marks[n] - marks[n - 1] for marks, _, _ in runs)
        prepare = min(client.called[n - 1] - marks[n - 1] for marks, _, client in runs)
        turn_index = (n - 1) // STEPS_PER_TURN
        window = range(turn_index - WINDOW // 2, turn_index + WINDOW // 2 + 1)
        window = range(max(0, window.start), window.stop)
        averages = []
        for _, turns, _ in runs:
            span = [turns[i] for i in window]
            averages.append(sum(end - start for start, end, _ in span) / sum(s for *_, s in span))
        request = last_client.requests[n - 1]
        encode = _best_encode(last_client.wire, request)
        assembly = _best_cached_encode(last_client.wire, request)
        body = last_client.wire.encode_body(request)
        per_size[str(n)] = {
            "messages": len(request.messages),
            "body_bytes": len(body),
            "step_us": round(step * 1e6, 1),
            "prepare_us": round(prepare * 1e6, 1),
            "cached_assembly_us": round(assembly * 1e6, 1),
            "full_encode_us": round(encode * 1e6, 1),
            "ratio": round(step / encode, 2),
            "turn_avg_step_us": round(min(averages) * 1e6, 1),
            "turn_avg_step_us_median_of_runs": round(statistics.median(averages) * 1e6, 1),
        }
    out["steps"] = per_size
    small, large = per_size[str(min(STEPS))], per_size[str(max(STEPS))]
    out["flatness_1000_over_10"] = {
        "step_us": round(large["step_us"] / small["step_us"], 2),
        "turn_avg_step_us": round(large["turn_avg_step_us"] / small["turn_avg_step_us"], 2),
    }
    provider = asyncio.run(_provider_cost(last_client, last_client.requests[0]))
    out["provider_us"] = round(provider * 1e6, 1)
    out["body_cache"] = {"hits": last_client.cache.hits, "misses": last_client.cache.misses}
    return out


# --- the invariant checker's cost ------------------------------------------------


def _window_step(marks: list[float], turns: list[tuple[float, float, int]], step: int) -> float:
    """Per-step time of the WINDOW turns around global step ``step`` (1-based)."""
    index = (step - 1) // STEPS_PER_TURN
    lo, hi = max(0, index - WINDOW // 2), index + WINDOW // 2 + 1
    span = turns[lo:hi]
    return sum(end - start for start, end, _ in span) / sum(n for *_, n in span)


def bench_checker(wire: str = "openai") -> dict[str, Any]:
    """Per-step time with the checker on and off at 100, 1,000 and 10,000 messages."""
    targets = CHECK_MESSAGES
    total = 0
    # Two messages per step (an assistant message and a tool result or a prompt).
    total = targets[-1] // 2 + STEPS_PER_TURN * (WINDOW + 2)
    best: dict[bool, dict[int, float]] = {False: {}, True: {}}
    messages: dict[int, int] = {}
    for _ in range(CHECK_RUNS):
        for check in (False, True):
            marks, turns, client = asyncio.run(_grow(total, wire, check=check))
            for target in targets:
                step = next(
                    i + 1
                    for i, size in enumerate(client.sizes)
                    if size >= target and i % STEPS_PER_TURN == 0
                )
                messages[target] = client.sizes[step - 1]
                took = _window_step(marks, turns, step)
                best[check][target] = min(best[check].get(target, float("inf")), took)
    rows = {
        str(t): {
            "messages": messages[t],
            "off_us": round(best[False][t] * 1e6, 1),
            "on_us": round(best[True][t] * 1e6, 1),
            "on_over_off": round(best[True][t] / best[False][t], 2),
        }
        for t in targets
    }
    low, high = str(targets[0]), str(targets[-1])
    return {
        "runs": CHECK_RUNS,
        "sizes": rows,
        "on_flatness": round(rows[high]["on_us"] / rows[low]["on_us"], 2),
        "off_flatness": round(rows[high]["off_us"] / rows[low]["off_us"], 2),
    }


# --- cached-token efficiency on the demo ---------------------------------------


def _shared_tokens(a: Sequence[Segment], b: Sequence[Segment]) -> int:
    """Tokens of the longest whole-segment prefix two chained renderings share."""
    tokens = 0
    for x, y in zip(a, b, strict=False):
        if x.key != y.key:
            break
        tokens += x.tokens
    return tokens


def _segments(root: str, body: bytes) -> list[Segment]:
    return chain_segments(root, openai_sources(decode(body)))


def bench_demo_cache() -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="tapelog-bench-") as tmp:
        printed = io.StringIO()
        ok = asyncio.run(_run_demo(tmp, "emulator", Console(file=printed, width=160)))
        assert ok, printed.getvalue()
        (summary,) = JsonlStore(tmp).list()
        session = JsonlStore(tmp).load(summary.id).session
    events = list(session.events)
    rebuilt = rebuild_requests(events, session_id=session.id)
    replies = [e for e in events if e.type == "assistant/message"]
    sent_back: list[list[Segment]] = []  # each prompt followed by its logged reply
    rows: list[dict[str, Any]] = []
    reported_total = bound_total = 0
    for item, reply in zip(rebuilt, replies, strict=True):
        request = item.request
        root = f"deepseek:{request.config.model}"
        prompt = _segments(root, encode_request(request))
        message = derive_event_message(reply)
        assert message is not None
        extended = LlmRequest(header=request.header, messages=freeze([*request.messages, message]))
        shared = max((_shared_tokens(prompt, seen) for seen in sent_back), default=0)
        bound = DEEPSEEK_UNIT * (shared // DEEPSEEK_UNIT)
        reported = int(reply.data["usage"]["cache_read"])
        reported_total += reported
        bound_total += bound
        rows.append(
            {
                "request": item.index,
                "turn.step": f"{item.turn}.{item.step}",
                "prompt_tokens": sum(s.tokens for s in prompt),
                "shared_tokens": shared,
                "bound": bound,
                "reported": reported,
                "header_changed": [events[s].type for s in item.header_seqs],
            }
        )
        sent_back.append(_segments(root, encode_request(extended)))
    prompt_total = sum(r["prompt_tokens"] for r in rows)
    return {
        "requests": rows,
        "reported_cached": reported_total,
        "max_cacheable": bound_total,
        "prompt_tokens": prompt_total,
        "efficiency": round(reported_total / bound_total, 4) if bound_total else None,
        "hit_ratio_of_all_prompt_tokens": round(reported_total / prompt_total, 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--wire", choices=WIRES, default="openai", help="the body encoded at the edge"
    )
    args = parser.parse_args()
    started = time.perf_counter()
    result: dict[str, Any] = {
        "python": sys.version.split()[0],
        "wire": args.wire,
        "loop": bench_loop(args.wire),
        "checker": bench_checker(args.wire),
        "demo_cache": bench_demo_cache(),
    }
    result["seconds"] = round(time.perf_counter() - started, 1)
    print(encode_str(result))


if __name__ == "__main__":
    main()
