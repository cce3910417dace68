"""The miniharness column of ``bench/bench_cold.py``; runs in the bench-only venv.

    $MINIHARNESS_PYTHON bench/miniharness_cold.py STEPS ROUNDS

miniharness (GitHub ZZKeepCurious/mini-deepseek-harness-python, the Python port
of the same log-first design) is installed in its own venv, never in
tapelog's: ``bench_cold.py`` runs this file with that venv's interpreter and
reads the one JSON object it prints. It has no dependency on tapelog.

The session has the workload of ``bench_cold``: turns of two steps (a
``read_file`` call whose result is ~600 bytes, then a ~150-byte answer) after
a ~200-byte prompt. One turn is run through miniharness's real ``AgentLoop``
with its ``FakeLlmAdapter``; its events are the template repeated (seq, turn
and call ids renumbered) until the log has ``STEPS`` steps, written with its
``JsonlPersistence``. Then, CPU time, median of ``ROUNDS``:

* ``parse_s``: read the file and ``json.loads`` every line (miniharness's own
  floor: it writes with ``json.dumps``);
* ``resume_s``: ``repair_and_replay`` (load, check, repair, replay into a
  ``Session``) and a published ``AgentLoop`` on it: a cold resume;
* ``first_turn_s``: the resumed loop's first turn (two steps), the same turn
  ``bench_cold`` runs on tapelog.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from miniharness.core.agent_loop.agent import AgentLoop
from miniharness.core.scope import Context
from miniharness.core.session import Session
from miniharness.core.session.persistence import JsonlPersistence, repair_and_replay
from miniharness.core.session_store import install_sessions
from miniharness.core.tools import Tool, ToolRegistry
from miniharness.llm import FakeLlmAdapter

_LOREM = (
    "The session log is the single source of truth; every request is a pure "
    "function of it, so a prompt cache hits by construction. "
)


def _text(n: int, salt: int) -> str:
    return f"[{salt}] " + (_LOREM * (n // len(_LOREM) + 1))[:n]


def _thaw(value: Any) -> Any:
    if isinstance(value, dict) or hasattr(value, "items"):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_thaw(v) for v in value]
    return value


_CALL_ID_KEYS = ("callId", "toolCallId")


def _renumber(value: Any, turn: int) -> Any:
    """A template event's data for turn ``turn`` (turn numbers and call ids)."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key == "turn" and isinstance(item, int):
                out[key] = turn
            elif key in _CALL_ID_KEYS or (key == "id" and value.get("type") == "tool-call"):
                out[key] = f"call_{turn}"
            else:
                out[key] = _renumber(item, turn)
        return out
    if isinstance(value, list):
        return [_renumber(v, turn) for v in value]
    return value


def _registry(ctx: Context) -> ToolRegistry:
    reg = ToolRegistry(ctx)
    reg.register(
        Tool(
            name="read_file",
            description="The read_file tool.",
            parameters={"type": "object", "properties": {"path": {"type": "string"}}},
            execute=lambda args, e: _text(600, 0),
        )
    )
    return reg


def _adapter() -> FakeLlmAdapter:
    return FakeLlmAdapter(
        tool_call={"name": "read_file", "arguments": {"path": "file.txt"}},
        final_text=_text(150, 0),
    )


def build(root: Path, steps: int) -> str:
    """Write a ``steps``-step session with ``JsonlPersistence``; return its id."""
    ctx = Context(name="root")
    store = install_sessions(ctx)
    session = store.prepare("template", {"meta": {"cwd": str(root)}})
    loop = AgentLoop(session, _adapter(), _registry(ctx), ctx, system_prompt=_text(1200, 0))
    loop.publish()
    loop.followup(_text(200, 1))
    loop.followup(_text(200, 2))
    events = [_thaw(e) for e in session.events]
    starts = [i for i, e in enumerate(events) if e["type"] == "turn/start"]
    # turn 2 from the inbox splice before its turn/start: what every later turn logs
    template = events[starts[1] - 1 :]
    out = events[: starts[1] - 1]
    turn = 1
    while sum(1 for e in out if e["type"] == "step/start") < steps:
        turn += 1
        for event in template:
            out.append({**event, "seq": len(out), "data": _renumber(event["data"], turn)})
    loop.dispose()
    persistence = JsonlPersistence(root / "sessions")
    for event in out:
        persistence.append("cold", event)
    persistence.flush()
    return "cold"


def _cpu(fn: Any) -> tuple[float, Any]:
    start = time.process_time()
    value = fn()
    return time.process_time() - start, value


def measure(steps: int, rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        session_id = build(root, steps)
        persistence = JsonlPersistence(root / "sessions")
        path = persistence.path_of(session_id)
        assert path is not None
        parse, resume, first = [], [], []
        for _ in range(rounds):
            seconds, _ = _cpu(lambda: [json.loads(x) for x in path.read_bytes().splitlines() if x])
            parse.append(seconds)
        for _ in range(rounds):
            # a new Context per round: a cold process has no loop bound to the id
            ctx = Context(name="root")
            install_sessions(ctx)
            reg = _registry(ctx)

            def resume_loop(reg: ToolRegistry = reg, ctx: Context = ctx) -> AgentLoop:
                session = repair_and_replay(persistence, session_id, Session(session_id))
                loop = AgentLoop(session, _adapter(), reg, ctx, system_prompt=_text(1200, 0))
                loop.publish()
                return loop

            seconds, loop = _cpu(resume_loop)
            resume.append(seconds)
            seconds, _ = _cpu(lambda loop=loop: loop.followup(_text(200, 9)))
            first.append(seconds)
            messages = sum(1 for e in loop.session.events if e["type"].endswith("/message")) + sum(
                1 for e in loop.session.events if e["type"] == "tool/result"
            )
            loop.dispose()
        return {
            "steps": steps,
            "log_mb": round(path.stat().st_size / 1e6, 2),
            "messages": messages,
            "parse_s": round(statistics.median(parse), 3),
            "resume_s": round(statistics.median(resume), 3),
            "first_turn_s": round(statistics.median(first), 3),
        }


if __name__ == "__main__":
    print(json.dumps(measure(int(sys.argv[1]), int(sys.argv[2]))))
