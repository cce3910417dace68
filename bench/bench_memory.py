"""Benchmark of memory per history message; prints one JSON object.

    .venv/bin/python bench/bench_memory.py [--wire openai|anthropic|both] [--jobs N]
        [--no-peers] [--peer-messages N]

What grows with a session is what the loop keeps per message: the logged
events (the surface message and everything around it: chunks, tool calls,
step markers), the projection cache, the per-node wire pieces of the
``BodyCache`` and, with the invariant checker on, the checker's own shadow of
all of that. This measures it as the process's peak resident set size.

The real :class:`tapelog.agent.Agent` drives one growing session against
:class:`InstantClient`, a provider client at the edge that answers each
request at once from canned chunks made for that step (the workload of
``bench/bench_loop.py``, with smaller payloads: a ~140-byte prompt per turn;
two tool-calling steps per turn, each a short text and ``lookup`` with
arguments like ``{"key": "k12"}`` streamed in 8-byte pieces, whose result is
~300 bytes, as a realistic tool result is (issue 20 compares every harness on
such histories); then a ~160-byte answer streamed in 24-byte pieces; usage and
finish on every step). A *history message* is one surface node (user
message, assistant message, tool result), counted as ``len(session.surface)``;
a turn adds six. Nothing else is kept: the client does not keep the requests
it saw (that alone would grow with the square of the session).

Each measurement runs in a fresh subprocess (so one run's peak cannot hide
another's), grows the session until it has at least ``n`` history messages,
and reports its peak RSS (``VmHWM``, see ``_memory_peers.peak_kb``): for
``n`` = 100 and 10,000, with ``check=False`` and ``check=True``. ``kb_per_message`` is
``(peak_10000 - peak_100) / (messages_10000 - messages_100)`` in KB: the cost
of one more message of history, the interpreter and imports cancelled out.
The peak includes the last step's transient request body (one copy, ~1.8 MB at
10,000 messages, so ~0.18 KB per message; with the check, the rebuilt body
too), which the HTTP request needs anyway. ``events_per_message`` says how
much of the log stands behind each message: every streamed chunk is an
``assistant/chunk`` event (3.5 per message here, the largest single share of
the log). A session seals the records of such events into compressed blocks
once they add up to 64 KB (``tapelog.log._record_blocks``), so they cost about
their compressed bytes; every turn's text is drawn anew (``WORKLOAD``), so the
compression finds no text repeated from turn to turn, as in a real history.

``--wire`` picks the body encoded at the edge: ``openai`` (the DeepSeek dialect
of the OpenAI-compatible wire), ``anthropic`` (the Anthropic Messages wire) or
``both`` (the default). ``--jobs`` (default 2) runs that many measurements at
once: each is its own process, so this changes only the wall time (under two
minutes on 2 cores for both wires), never a peak.

Side by side, in the same run, the harnesses users would pick instead
(``bench/_memory_peers.py`` says how each is driven and how its messages map
to ours): pydantic-ai, the OpenAI Agents SDK and, where ``MINIHARNESS_PYTHON``
names its bench-only venv's interpreter (see ``bench/bench_cold.py``),
miniharness; otherwise its column says why it is skipped. They run the same
workload, the same bytes (``WORKLOAD``), each measurement in a fresh
subprocess. Their loops do work proportional to the whole history on every
turn in Python objects, so their time grows with the square of the history
(~35 s each for pydantic-ai and the Agents SDK to reach 2,000 messages; 11
and 14 min for 10,000, where their KB per message stays within 0.1): the
peers grow from 100 to ``--peer-messages`` (default 2,000) and tapelog is
measured at that size too (``tapelog_at_peer_size``), so each ratio in
``tapelog_over_peer`` compares KB per message over the same growth. At a few
hundred messages a peak may not grow measurably; the ratio is then ``null``.
``--no-peers`` measures tapelog only.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson

# The loop benchmark's workload: its system prompt, turn shape, targets and text.
from _memory_peers import PEERS, fill, interpreter, peak_kb, skipped, step_reply
from _memory_peers import measure as measure_peer
from bench_loop import _TARGETS, STEPS_PER_TURN, SYSTEM

from tapelog.agent import Agent, tool
from tapelog.llm import LlmRequest
from tapelog.llm._api import AbortHandle, AnthropicWire, BodyCache, OpenAIWire
from tapelog.llm._types import normalise_usage
from tapelog.log._api import FrozenDict, LlmCallConfig, Session, encode_str, freeze

SIZES = (100, 10_000)
MEMORY_WIRES = ("openai", "anthropic")
"""The wires :class:`InstantClient` speaks (bench_loop also runs ``responses``,
whose replies carry reasoning items this workload does not make)."""


WORKLOAD: dict[str, Any] = {
    "system": SYSTEM,
    "steps_per_turn": STEPS_PER_TURN,
    "prompt": "Question {n}: {words:126}",
    "note": "Let me look note {n} up in the project notes.",
    "arguments": '{"key": "k{n}"}',
    "result": "{key}: {words:294}",
    "answer": "Answer {n}: {words:146}",
}
"""The text of every turn, the same bytes for tapelog and each peer: ``{n}``
is the turn (prompt) or global step, ``{key}`` the tool's argument and
``{words:N}`` N characters of pseudo-words drawn for that turn, step or key
(``_memory_peers.words``): no two turns repeat a text."""


@tool
def lookup(key: str) -> str:
    """Look a key up in the project notes.

    Args:
        key: The note to read.
    """
    return fill(WORKLOAD["result"], key=key)


def _canned(step: int) -> list[FrozenDict]:
    """The chunks of global step ``step`` (1-based), made when it is asked for:
    two tool steps, then an answer."""
    text, call = step_reply(step, WORKLOAD)
    chunks: list[dict[str, Any]] = []
    if call is not None:
        call_id, arguments = call
        chunks.append({"kind": "text", "text": text})
        chunks.append({"kind": "tool_call", "index": 0, "id": call_id, "name": "lookup"})
        chunks += [
            {"kind": "tool_call", "index": 0, "arguments": arguments[i : i + 8]}
            for i in range(0, len(arguments), 8)
        ]
        finish = "tool_calls"
    else:
        chunks += [{"kind": "text", "text": text[i : i + 24]} for i in range(0, len(text), 24)]
        finish = "stop"
    chunks.append({"kind": "usage", "usage": normalise_usage(input=100, cache_read=64, output=60)})
    chunks.append({"kind": "finish", "reason": finish, "raw": finish})
    frozen: list[FrozenDict] = [freeze(c) for c in chunks]
    return frozen


class InstantClient:
    """A provider at the edge that answers every request at once from canned
    chunks; it keeps nothing of the requests it sees."""

    def __init__(self, wire: str) -> None:
        self.provider = _TARGETS[wire][0]
        self.wire: OpenAIWire | AnthropicWire = (
            OpenAIWire(dialect="deepseek") if wire == "openai" else AnthropicWire()
        )
        self.cache = BodyCache()  # the Agent adopts it: one encode per surface node
        self.calls = 0

    async def stream(
        self, request: LlmRequest, *, abort: AbortHandle, body: bytes | None = None
    ) -> AsyncIterator[FrozenDict]:
        self.calls += 1
        for chunk in _canned(self.calls):
            yield chunk


class Grower:
    """The bench's session and agent on ``wire``, grown turn by turn (also by
    ``memory_where.py``, which snapshots it between sizes)."""

    def __init__(self, wire: str, check: bool) -> None:
        provider, model = _TARGETS[wire]
        self.session = Session()
        self.agent = Agent(
            self.session,
            InstantClient(wire),
            config=LlmCallConfig(provider=provider, model=model, max_tokens=1024),
            system=SYSTEM,
            tools=[lookup],
            check=check,
            max_steps=STEPS_PER_TURN,
        )
        self.turn = 0

    async def grow(self, messages: int) -> Session:
        """Run turns until the session has ``messages`` history messages."""
        while len(self.session.surface) < messages:
            self.turn += 1
            result = await self.agent.run(fill(WORKLOAD["prompt"], n=self.turn))
            assert result.reason["kind"] == "completed", result.reason
        return self.session


async def _grow(messages: int, wire: str, check: bool) -> Session:
    """One session, grown turn by turn until it has ``messages`` history messages."""
    return await Grower(wire, check).grow(messages)


def child(messages: int, wire: str, check: bool) -> dict[str, Any]:
    """One measurement, in this (fresh) process."""
    started = time.perf_counter()
    session = asyncio.run(_grow(messages, wire, check))
    return {
        "messages": len(session.surface),
        "events": len(session.events),
        "peak_rss_kb": peak_kb(),
        "seconds": round(time.perf_counter() - started, 2),
    }


def _measure(messages: int, wire: str, check: bool) -> dict[str, Any]:
    argv = [sys.executable, __file__, "--child", str(messages), "--wire", wire]
    if check:
        argv.append("--check")
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"measurement {argv[2:]} failed:\n{done.stderr}")
    out: dict[str, Any] = orjson.loads(done.stdout.strip().splitlines()[-1])
    return out


def _summary(
    results: dict[tuple[str, bool, int], Any], name: str, check: bool, large: int
) -> dict[str, Any]:
    """KB per message of ``name`` from 100 to ``large`` history messages."""
    small_run, large_run = results[name, check, SIZES[0]], results[name, check, large]
    runs = {str(SIZES[0]): small_run, str(large): large_run}
    grown = large_run["messages"] - small_run["messages"]
    return {
        "peak_rss_mb": {n: round(m["peak_rss_kb"] / 1024, 1) for n, m in runs.items()},
        "messages": {n: m["messages"] for n, m in runs.items()},
        "kb_per_message": round((large_run["peak_rss_kb"] - small_run["peak_rss_kb"]) / grown, 2),
        **(
            {"events_per_message": round(large_run["events"] / large_run["messages"], 2)}
            if "events" in large_run
            else {}
        ),
        f"seconds_{large}": large_run["seconds"],
    }


def bench(
    wires: tuple[str, ...], jobs: int, peers: tuple[str, ...], peer_size: int
) -> dict[str, Any]:
    """Every measurement in its own process, ``jobs`` at a time (the longest
    first: the peers at ``peer_size``, whose time grows with the square of the
    history). With peers, tapelog is measured at ``peer_size`` too, so that each
    ratio compares the same growth."""
    present = tuple(p for p in peers if interpreter(p) is not None)
    ours = (SIZES[-1], peer_size) if present and peer_size != SIZES[-1] else (SIZES[-1],)
    runs: list[tuple[str, bool, int]] = [(peer, False, peer_size) for peer in present]
    runs += [(w, check, n) for n in (*ours, SIZES[0]) for check in (True, False) for w in wires]
    runs += [(peer, False, SIZES[0]) for peer in present]

    def measure(run: tuple[str, bool, int]) -> dict[str, Any]:
        name, check, n = run
        if name in PEERS:
            return measure_peer(name, n, WORKLOAD)
        return _measure(n, name, check)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        results = dict(zip(runs, pool.map(measure, runs), strict=True))
    checks = {"check_off": False, "check_on": True}
    out: dict[str, Any] = {
        wire: {key: _summary(results, wire, check, SIZES[-1]) for key, check in checks.items()}
        for wire in wires
    }
    if not peers:
        return out
    out["peer_size"] = peer_size
    columns: dict[str, Any] = {
        peer: _summary(results, peer, False, peer_size)
        if peer in present
        else {"skipped": skipped(peer)}
        for peer in peers
    }
    if present:
        out["tapelog_at_peer_size"] = {
            f"{wire}/{key}": _summary(results, wire, check, peer_size)
            for wire in wires
            for key, check in checks.items()
        }
    out["peers"] = columns
    out["tapelog_over_peer"] = {
        row: {
            # None where the peer's peak did not grow (too small a history)
            peer: round(tapelog["kb_per_message"] / column["kb_per_message"], 2)
            if column["kb_per_message"] > 0
            else None
            for peer, column in columns.items()
            if "kb_per_message" in column
        }
        for row, tapelog in out.get("tapelog_at_peer_size", {}).items()
    }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--wire", choices=(*MEMORY_WIRES, "both"), default="both")
    parser.add_argument(
        "--jobs", type=int, default=2, help="measurements run at once (each in its own process)"
    )
    parser.add_argument(
        "--no-peers", action="store_true", help="measure tapelog only (no peer columns)"
    )
    parser.add_argument(
        "--peer-messages",
        type=int,
        default=2_000,
        help="history the peers grow to (their time grows with its square: 10,000 takes ~20 min)",
    )
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--check", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(encode_str(child(args.child, args.wire, args.check)))
        return
    started = time.perf_counter()
    wires = MEMORY_WIRES if args.wire == "both" else (args.wire,)
    result: dict[str, Any] = {
        "python": sys.version.split()[0],
        "orjson": orjson.__version__,
    }
    peers = () if args.no_peers else PEERS
    result.update(bench(wires, max(1, args.jobs), peers, args.peer_messages))
    result["seconds"] = round(time.perf_counter() - started, 1)
    print(encode_str(result))


if __name__ == "__main__":
    main()
