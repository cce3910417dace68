"""Benchmark of the session-log core; run by hand, prints one JSON object.

    .venv/bin/python bench/bench_log.py

* ``append``: events per second for a realistic mix (user prompts, streamed
  chunks, assistant messages with tool calls, tool results, turn/step markers),
  payloads built beforehand so only ``Session.append`` is timed.
* ``derive``: the cost of ``Session.derive_messages()`` per *new* event (best of 15), with
  1k, 10k and 100k events of history already projected. The cache projects
  each surface node once, so the cost must not grow with history: the
  ``ratio_100k_1k`` should stay near 1; what growth there is comes from
  copying the message references into the fresh list each call returns
  (``list_copy_us_*``).
* ``store_load``: ``JsonlStore.load`` of the 100k-event session against a plain
  ``orjson.loads`` of every line of the same file (skipped if there is no store).

``--cold STEPS`` instead measures load and verify of the realistic loop log
``bench/bench_cold.py`` uses (``bench_audit.build``, written by ``JsonlStore``;
10,000 steps is a 21 MB log of 115,005 events), in CPU seconds, best of
``--rounds``, as multiples of one parse (read the file, ``orjson.loads`` every
line). Each round runs both paths on the same bytes, alternating: ``bulk``
(what ``read_session_bytes`` and ``verify_jsonl`` take for an intact file)
and ``line_by_line`` (the path they fall back to, with the bulk path turned
off), so the two are compared under the same machine load. ``--profile``
adds the top of a cProfile of the bulk load.

    .venv/bin/python bench/bench_log.py --cold 10000 --rounds 5
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import pstats
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

from tapelog.log._api import Session, encode_str

SIZES = (1_000, 10_000, 100_000)
BATCH = 200  # new events appended before each timed derive_messages()
REPEATS = 15

_LOREM = (
    "The session log is the single source of truth; every request is a pure "
    "function of it, so a prompt cache hits by construction. "
)


def _text(n: int) -> list[dict[str, Any]]:
    return [{"type": "text", "text": (_LOREM * (n // len(_LOREM) + 1))[:n]}]


def event_mix() -> Iterator[tuple[str, dict[str, Any], str | None]]:
    """An endless agent-like stream: (type, data, surface_op)."""
    turn = 0
    while True:
        yield "turn/start", {"turn": turn}, None
        yield "user/message", {"content": _text(300), "source": {"kind": "user"}}, "append"
        for step in range(3):
            yield "step/start", {"turn": turn, "step": step}, None
            for i in range(12):
                chunk = {"kind": "text", "text": f"piece {i} "}
                yield "assistant/chunk", {"turn": turn, "step": step, "chunk": chunk}, None
            usage = {
                "input": 900,
                "cache_read": 12000,
                "cache_write": 0,
                "output": 120,
                "reasoning": 0,
            }
            yield (
                "assistant/chunk",
                {"turn": turn, "step": step, "chunk": {"kind": "usage", "usage": usage}},
                None,
            )
            calls = [
                {
                    "type": "tool_call",
                    "id": f"call-{turn}-{step}-{k}",
                    "name": "read",
                    "arguments": '{"path":"src/tapelog/log/_session.py"}',
                }
                for k in range(2 if step < 2 else 0)
            ]
            yield (
                "assistant/message",
                {
                    "turn": turn,
                    "step": step,
                    "content": _text(200) + calls,
                    "source": {"provider": "openai", "model": "m"},
                    "usage": usage,
                },
                "append",
            )
            for call in calls:
                yield (
                    "tool/call",
                    {
                        "turn": turn,
                        "step": step,
                        "call_id": call["id"],
                        "name": call["name"],
                        "arguments": call["arguments"],
                    },
                    None,
                )
            for call in calls:
                yield (
                    "tool/result",
                    {
                        "turn": turn,
                        "step": step,
                        "call_id": call["id"],
                        "content": _LOREM * 12,
                        "is_error": False,
                    },
                    "append",
                )
            yield "step/end", {"turn": turn, "step": step}, None
        yield "turn/end", {"turn": turn, "reason": {"kind": "completed"}}, None
        turn += 1


def _fill(
    session: Session, events: Iterator[tuple[str, dict[str, Any], str | None]], n: int
) -> None:
    for _ in range(n):
        etype, data, op = next(events)
        session.append(etype, data, surface_op=op)


def bench_append(n: int = 30_000) -> dict[str, Any]:
    stream = event_mix()
    payloads = [next(stream) for _ in range(n)]
    session = Session("bench-append")
    start = time.perf_counter()
    for etype, data, op in payloads:
        session.append(etype, data, surface_op=op)
    elapsed = time.perf_counter() - start
    surface = sum(1 for _, _, op in payloads if op is not None)
    return {"events": n, "surface_share": round(surface / n, 3), "events_per_s": round(n / elapsed)}


def bench_derive() -> tuple[dict[str, Any], Session]:
    out: dict[str, Any] = {"batch": BATCH}
    session = Session("bench-derive")
    stream = event_mix()
    for size in SIZES:
        _fill(session, stream, size - len(session))
        session.derive_messages()  # history projected and cached
        samples = []
        for _ in range(REPEATS):
            _fill(session, stream, BATCH)
            start = time.perf_counter()
            session.derive_messages()
            samples.append((time.perf_counter() - start) / BATCH * 1e6)
        out[f"us_per_new_event_{size // 1000}k"] = round(min(samples), 3)
        # The fresh list each call returns is a copy of every message reference:
        # the one part that grows with history (a memcpy, not a re-projection).
        messages = session.derive_messages()
        start = time.perf_counter()
        for _ in range(100):
            list(messages)
        out[f"list_copy_us_{size // 1000}k"] = round((time.perf_counter() - start) / 100 * 1e6, 1)
    out["ratio_100k_1k"] = round(out["us_per_new_event_100k"] / out["us_per_new_event_1k"], 2)
    return out, session


def bench_store_load(session: Session) -> dict[str, Any] | str:
    try:
        from tapelog.store import JsonlStore
    except ImportError:
        return "skipped: tapelog.store is not available"
    with tempfile.TemporaryDirectory() as root:
        store = JsonlStore(root)
        store.create(session).close()
        data = store.path(session.id).read_bytes()
        lines = data.splitlines()

        def plain() -> None:
            for line in lines:
                orjson.loads(line)

        def load() -> None:
            store.load(session.id)

        timings = {}
        for name, run in (("orjson_loads_s", plain), ("store_load_s", load)):
            samples = []
            for _ in range(3):
                start = time.perf_counter()
                run()
                samples.append(time.perf_counter() - start)
            timings[name] = min(samples)
    return {
        "events": len(session),
        "file_mb": round(len(data) / 1e6, 1),
        "orjson_loads_s": round(timings["orjson_loads_s"], 3),
        "store_load_s": round(timings["store_load_s"], 3),
        "events_per_s": round(len(session) / timings["store_load_s"]),
        "ratio_store_to_orjson": round(timings["store_load_s"] / timings["orjson_loads_s"], 1),
    }


def _cpu(fn: Callable[[], object]) -> float:
    """CPU seconds of ``fn``; freeing what it returns is not counted (as in
    ``bench_cold.py``: a loaded session is kept, not dropped)."""
    start = time.process_time()
    kept = fn()
    elapsed = time.process_time() - start
    del kept
    return elapsed


def bench_cold(steps: int, rounds: int, profile: bool) -> dict[str, Any]:
    """Load and verify of a ``steps``-step loop log, bulk and line by line (see above)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_audit import build

    from tapelog.store import JsonlStore

    with tempfile.TemporaryDirectory() as root:
        session = build(steps, "deepseek")
        store = JsonlStore(root)
        store.create(session).close()
        out = {"steps": steps, "events": len(session)}
        return out | _measure_cold(store.path(session.id), rounds, profile)


def _measure_cold(path: Path, rounds: int, profile: bool) -> dict[str, Any]:
    from tapelog.store import _jsonl_read, _verify
    from tapelog.store._api import read_session_bytes, verify_jsonl

    def parse() -> None:
        for line in path.read_bytes().split(b"\n"):
            if line:
                orjson.loads(line)

    def load() -> object:
        return read_session_bytes(path.read_bytes())

    def verify() -> object:
        report = verify_jsonl(path.read_bytes())
        assert report.ok
        return report

    @contextlib.contextmanager
    def line_by_line() -> Iterator[None]:
        kept = _jsonl_read.load_jsonl_bulk, _verify.load_jsonl_bulk
        _jsonl_read.load_jsonl_bulk = _verify.load_jsonl_bulk = lambda data: None
        try:
            yield
        finally:
            _jsonl_read.load_jsonl_bulk, _verify.load_jsonl_bulk = kept

    times: dict[str, list[float]] = {}
    for _ in range(rounds):
        times.setdefault("parse", []).append(_cpu(parse))
        for name, run in (("load", load), ("verify", verify)):
            times.setdefault(f"{name}_bulk", []).append(_cpu(run))
            with line_by_line():
                times.setdefault(f"{name}_line_by_line", []).append(_cpu(run))
    best = {name: min(samples) for name, samples in times.items()}
    out: dict[str, Any] = {
        "log_mb": round(path.stat().st_size / 1e6, 1),
        "seconds": {name: round(value, 3) for name, value in best.items()},
        "over_parse": {name: round(v / best["parse"], 2) for name, v in best.items()},
    }
    if profile:
        out["profile"] = _profile(load)
    return out


def _profile(fn: Callable[[], object], top: int = 15) -> list[str]:
    """The ``top`` functions of a cProfile of ``fn`` by own time."""
    profiler = cProfile.Profile()
    profiler.runcall(fn)
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(top)
    rows = text.getvalue().splitlines()
    start = next(i for i, row in enumerate(rows) if row.lstrip().startswith("ncalls"))
    return [" ".join(row.split()) for row in rows[start : start + top + 1]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--cold", type=int, metavar="STEPS", help="load and verify only")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    if args.cold:
        print(encode_str(bench_cold(args.cold, args.rounds, args.profile)))
        return
    start = time.perf_counter()
    result: dict[str, Any] = {"python": sys.version.split()[0]}
    result["append"] = bench_append()
    result["derive"], session = bench_derive()
    result["store_load"] = bench_store_load(session)
    result["total_s"] = round(time.perf_counter() - start, 1)
    print(encode_str(result))


if __name__ == "__main__":
    main()
