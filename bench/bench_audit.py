"""Benchmark of the cache audit; run by hand, prints one JSON object.

    .venv/bin/python bench/bench_audit.py [--provider deepseek|openai|anthropic]

Builds synthetic loop sessions of 2,500 and 10,000 steps through
``Session.append`` (turns of two steps: a tool call with its result, then an
answer; streamed chunks; usage on every answer; the initial header snapshot and
four tool-registration header deltas spread over the session), writes each with
``JsonlStore``, then times ``JsonlStore.load`` and ``cache_report`` (best of 3).

``audit_over_parse`` is the headline: what ``tapelog cache SESSION --json``
does (load the stored log, validating every event; audit it; encode the JSON)
divided by the time to read the same file and ``orjson.loads`` every line,
which is the least any reader of the log must spend. Machines are noisy, so
the ratio is what to compare between runs.

The audit must cost what the log holds, not what every request re-sends: the
``ratio`` of seconds per MB between the two sizes should stay near 1 (a
re-render of the history per request would make it about 4). A header change
that alters the prompt's start re-keys the whole prompt once (a provider
re-reads it too), so each such change costs one pass over the history:
``--deltas N`` shows that cost.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from tapelog.audit import cache_report
from tapelog.log import encode
from tapelog.log._api import Session, encode_str
from tapelog.store import JsonlStore

SIZES = (2_500, 10_000)
REPEATS = 5
DELTAS = 4
MODELS = {"deepseek": "deepseek-chat", "openai": "gpt-4.1-mini", "anthropic": "claude-sonnet-4-5"}
_LOREM = (
    "The session log is the single source of truth; every request is a pure "
    "function of it, so a prompt cache hits by construction. "
)


def _text(n: int, salt: int) -> str:
    return f"[{salt}] " + (_LOREM * (n // len(_LOREM) + 1))[:n]


def _tool(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "description": f"The {name} tool.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
    }


def build(steps: int, provider: str, *, deltas: int = DELTAS) -> Session:
    """A valid loop session of ``steps`` steps (two per turn), ``deltas`` tool registrations."""
    session = Session(f"bench-{provider}-{steps}")
    append = session.append
    model = MODELS[provider]
    tools = [_tool("read_file")]
    header = {
        "config": {"provider": provider, "model": model, "max_tokens": 1024},
        "system": "\n".join(f"Rule {i}: be careful." for i in range(40)),
        "tools": tools,
    }
    usage = {"input": 200, "cache_read": 4000, "cache_write": 0, "output": 40, "reasoning": 0}
    source = {"provider": provider, "model": model}
    delta_at = {steps * k // (deltas + 1) + 1 for k in range(1, deltas + 1)}
    step_count = 0
    turn = 0
    while step_count < steps:
        turn += 1
        append("turn/start", {"turn": turn})
        user = {"content": [{"type": "text", "text": _text(200, turn)}], "source": {"kind": "user"}}
        append("user/message", user, surface_op="append")
        for step in (1, 2):
            step_count += 1
            append("step/start", {"turn": turn, "step": step})
            if step_count == 1:
                append("request/header", {"header": header, "reason": "initial"})
            elif step_count in delta_at:
                added = _tool(f"tool_{step_count:05d}")
                append("request/header-delta", {"tools": {"add": [added]}})
            for i in range(6):
                chunk = {"kind": "text", "text": f"piece {i} "}
                append("assistant/chunk", {"turn": turn, "step": step, "chunk": chunk})
            data: dict[str, Any] = {"turn": turn, "step": step, "source": source, "usage": usage}
            if step == 1:
                call_id = f"call_{turn}"
                arguments = f'{{"path": "file_{turn}.txt"}}'
                block = {"type": "tool_call", "id": call_id, "name": "read_file"}
                data["content"] = [{**block, "arguments": arguments}]
                append("assistant/message", data, surface_op="append")
                call = append(
                    "tool/call",
                    {
                        "turn": turn,
                        "step": step,
                        "call_id": call_id,
                        "name": "read_file",
                        "arguments": arguments,
                    },
                )
                result = {
                    "turn": turn,
                    "step": step,
                    "call_id": call_id,
                    "content": _text(600, turn),
                    "is_error": False,
                }
                append("tool/result", result, surface_op="append", source_seqs=[call.seq])
            else:
                data["content"] = [{"type": "text", "text": _text(150, turn)}]
                append("assistant/message", data, surface_op="append")
            append("step/end", {"turn": turn, "step": step})
        append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    return session


def _best(fn: Callable[[], Any]) -> tuple[float, Any]:
    best, value = float("inf"), None
    for _ in range(REPEATS):
        start = time.process_time()  # CPU time: what another process does not change
        value = fn()
        best = min(best, time.process_time() - start)
    return best, value


def _parse_every_line(path: Path) -> int:
    """The floor: read the file and decode every line with orjson."""
    lines = path.read_bytes().split(b"\n")
    return sum(1 for line in lines if line and orjson.loads(line) is not None)


def _audit_command(store: JsonlStore, session_id: str) -> bytes:
    """What ``tapelog cache SESSION --json`` does, in process."""
    loaded = store.load(session_id).session
    return encode(cache_report(loaded).to_json())


def measure(steps: int, provider: str, deltas: int, root: Path) -> dict[str, Any]:
    session = build(steps, provider, deltas=deltas)
    store = JsonlStore(root)
    with store.create(session) as writer:
        writer.flush()
    path = store.path(session.id)
    megabytes = path.stat().st_size / 1e6
    parse_s, _ = _best(lambda: _parse_every_line(path))
    command_s, _ = _best(lambda: _audit_command(store, session.id))
    load_s, loaded = _best(lambda: store.load(session.id).session)
    audit_s, report = _best(lambda: cache_report(loaded))
    totals = report.totals
    return {
        "steps": steps,
        "events": len(loaded.events),
        "log_mb": round(megabytes, 2),
        "parse_s": round(parse_s, 3),
        "audit_command_s": round(command_s, 3),
        "audit_over_parse": round(command_s / parse_s, 2),
        "load_s": round(load_s, 3),
        "cache_report_s": round(audit_s, 3),
        "load_s_per_mb": round(load_s / megabytes, 4),
        "cache_report_s_per_mb": round(audit_s / megabytes, 4),
        "requests": totals.requests,
        "drops": sum(1 for r in report.requests if r.drop),
        "cached_expected": totals.cached_expected,
    }


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--provider", choices=sorted(MODELS), default="deepseek")
    parser.add_argument("--deltas", type=int, default=DELTAS, help="header deltas per session")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        small, large = (measure(n, args.provider, args.deltas, Path(tmp)) for n in SIZES)
    out = {
        "provider": args.provider,
        "header_deltas": args.deltas,
        "sizes": [small, large],
        "ratio_cache_report_s_per_mb": round(
            large["cache_report_s_per_mb"] / small["cache_report_s_per_mb"], 2
        ),
        "ratio_load_s_per_mb": round(large["load_s_per_mb"] / small["load_s_per_mb"], 2),
        "audit_over_parse": [small["audit_over_parse"], large["audit_over_parse"]],
    }
    print(encode_str(out))


if __name__ == "__main__":
    main(sys.argv[1:])
