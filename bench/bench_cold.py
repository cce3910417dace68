"""Benchmark of the cold paths: everything that starts from a stored log; prints one JSON object.

    .venv/bin/python bench/bench_cold.py [--steps 2500 10000] [--rounds 5] [--no-serve]

Each size is a realistic loop session built by ``bench_audit.build`` (turns of
two steps: a ``read_file`` call with its ~600-byte result, then an answer;
streamed chunks, usage on every answer, the initial header and four tool
registrations), written with ``JsonlStore``. Every path is timed in CPU seconds
(``time.process_time``: what the other processes of a shared machine do not
change), the median of ``--rounds`` rounds, and divided by ``parse_s``: read the
file and ``orjson.loads`` every line, the least any reader of the log must
spend. The ratios are what to compare between runs (issue 20's targets in
brackets):

* ``load``: ``JsonlStore.load`` (scan, canonical check, digests, replay) [≤ 2];
* ``verify``: ``verify_jsonl`` of the file's bytes, as ``tapelog verify`` [≤ 2];
* ``cache``: ``tapelog cache SESSION --json`` in process: load, ``cache_report``,
  encode [≤ 3];
* ``cache_checkpointed``: ``tapelog cache SESSION --json`` in process once
  the first run left its checkpoint beside the file (``<session>.audit``,
  ``checkpoint_mb`` in size): the bytes are read and hashed, the audit read
  back [≤ 3];
* ``serve_first_view``: the CPU a ``tapelog serve`` process spends answering the
  first ``GET /s/SESSION`` (read from ``/proc``, so the server's threads count),
  once its index has audited the session in the background (``--no-serve``
  skips it) [≤ 2], without a checkpoint beside the file and then
  (``serve_first_view_checkpointed``) with the one ``tapelog cache`` left:
  the server takes the audit and the window's body digests from it, and
  still loads and walks the log;
* ``cache_grown`` and ``serve_first_view_grown``: the same two on a log of
  ``steps + 10`` steps whose checkpoint was left when it had ``steps``: the log
  is loaded and the audit resumes from the checkpoint, over the new requests;
* ``resume``: ``JsonlStore.open`` and an ``Agent`` (checker on) on the
  session, then ``first_turn``: its first turn (a tool step and an answer step)
  against a client at the edge that answers at once. The file is restored
  before each round.

The ``miniharness`` column runs the same workload on miniharness (GitHub
ZZKeepCurious/mini-deepseek-harness-python, the Python port of the same
design) through ``bench/miniharness_cold.py``, with the interpreter of a
bench-only venv where it is installed, named by ``MINIHARNESS_PYTHON``::

    python3 -m venv /tmp/bench-venv
    /tmp/bench-venv/bin/pip install httpx setuptools
    /tmp/bench-venv/bin/pip install --no-build-isolation PATH/TO/mini-deepseek-harness-python
    MINIHARNESS_PYTHON=/tmp/bench-venv/bin/python .venv/bin/python bench/bench_cold.py

Without it the column says why it was skipped. Its ratios are to its own
``json.loads`` parse, and ``tapelog_over_miniharness`` compares resume plus
first turn in seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson
from bench_audit import MODELS, _text, build
from click.testing import CliRunner

from tapelog.agent import Agent, tool
from tapelog.audit import cache_report
from tapelog.cli import cli
from tapelog.llm import LlmRequest
from tapelog.llm._api import AbortHandle, BodyCache, OpenAIWire
from tapelog.llm._types import normalise_usage
from tapelog.log import encode
from tapelog.log._api import FrozenDict, LlmCallConfig, Session, encode_str, freeze
from tapelog.store import JsonlStore
from tapelog.store._api import verify_jsonl

_HERE = Path(__file__).resolve().parent
_TICKS = os.sysconf("SC_CLK_TCK")


@tool
def read_file(path: str) -> str:
    """Read a file of the project.

    Args:
        path: The file to read.
    """
    return _text(600, len(path))


class InstantClient:
    """A provider at the edge answering at once: a ``read_file`` call, then an answer."""

    def __init__(self) -> None:
        self.provider = "deepseek"
        self.wire = OpenAIWire(dialect="deepseek")
        self.cache = BodyCache()
        self.calls = 0

    async def stream(
        self, request: LlmRequest, *, abort: AbortHandle, body: bytes | None = None
    ) -> AsyncIterator[FrozenDict]:
        self.calls += 1
        chunks: list[dict[str, Any]]
        if self.calls % 2:
            call = {"kind": "tool_call", "index": 0, "id": f"resumed_{self.calls}"}
            chunks = [
                {**call, "name": "read_file"},
                {"kind": "tool_call", "index": 0, "arguments": '{"path": "again.txt"}'},
            ]
            finish = "tool_calls"
        else:
            chunks = [{"kind": "text", "text": _text(150, self.calls)}]
            finish = "stop"
        chunks.append({"kind": "usage", "usage": normalise_usage(input=100, output=60)})
        chunks.append({"kind": "finish", "reason": finish, "raw": finish})
        for chunk in chunks:
            yield freeze(chunk)


def _cpu(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.process_time()
    value = fn()
    return time.process_time() - start, value


def _median(rounds: int, fn: Callable[[], Any], before: Callable[[], Any] | None = None) -> float:
    times = []
    for _ in range(rounds):
        if before is not None:
            before()
        times.append(_cpu(fn)[0])
    return statistics.median(times)


def _cache_command(root: Path, session_id: str) -> str:
    result = CliRunner().invoke(
        cli, ["cache", session_id, "--store", str(root), "--json"], obj={"debug": False}
    )
    if result.exit_code != 0:
        raise RuntimeError(result.output)
    return result.stdout


def _parse_every_line(path: Path) -> int:
    """The floor: read the file and decode every line with orjson."""
    lines = path.read_bytes().split(b"\n")
    return sum(1 for line in lines if line and orjson.loads(line) is not None)


def _resume(store: JsonlStore, session_id: str) -> tuple[float, float]:
    """CPU seconds of a cold resume (open, Agent) and of its first turn."""

    def open_agent() -> tuple[Agent, Any]:
        session, writer = store.open(session_id)
        config = LlmCallConfig(provider="deepseek", model=MODELS["deepseek"], max_tokens=1024)
        system = "\n".join(f"Rule {i}: be careful." for i in range(40))
        agent = Agent(
            session,
            InstantClient(),
            config=config,
            system=system,
            tools=[read_file],
            writer=writer,
            check=True,
            max_steps=2,
        )
        return agent, writer

    resume, (agent, writer) = _cpu(open_agent)
    with writer:
        first, result = _cpu(lambda: asyncio.run(agent.run("One more question: " + _text(200, 0))))
    assert result.reason["kind"] == "completed", result.reason
    return resume, first


def _proc_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime + stime


@contextmanager
def _server(store: Path, index: Path) -> Iterator[tuple[str, int]]:
    """A ``tapelog serve`` process on a free loopback port: its URL and pid."""
    code = "from tapelog.cli import main; main()"
    args = ["serve", "--store", str(store), "--port", "0", "--index", str(index)]
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().decode().strip().rstrip("/"), proc.pid
    finally:
        proc.send_signal(2)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_audited(client: httpx.Client, url: str, limit: float = 900) -> None:
    """Until the sessions page no longer says a session awaits its audit."""
    start = time.perf_counter()
    while time.perf_counter() - start < limit:
        page = client.get(url + "/")
        page.raise_for_status()
        if "cache efficiency audited for" not in page.text:
            return
        time.sleep(0.5)
    raise TimeoutError("the serve index did not finish auditing the session")


def _first_view(root: Path, session_id: str) -> float:
    """CPU seconds a fresh ``tapelog serve`` spends on the session's first view."""
    with (
        tempfile.TemporaryDirectory() as tmp,
        httpx.Client(timeout=900) as client,
        _server(root, Path(tmp) / "index") as (url, pid),
    ):
        _wait_audited(client, url)  # the index's own audit of the session is not the view's
        before = _proc_cpu(pid)
        client.get(f"{url}/s/{session_id}").raise_for_status()
        return _proc_cpu(pid) - before


def _grown(steps: int, root: Path) -> tuple[str, Path, bytes]:
    """A log of ``steps + 10`` steps in ``root`` and the checkpoint ``tapelog
    cache`` left when it had ``steps``: the session id, the file, that checkpoint."""
    whole = build(steps + 10, "deepseek")
    events = whole.events
    turns = steps // 2  # two steps a turn
    cut = next(e.seq for e in events if e.type == "turn/end" and e.data["turn"] == turns) + 1
    session = Session(whole.id)
    store = JsonlStore(root)
    with store.create(session) as writer:
        for i, event in enumerate(events):
            if i == cut:
                writer.flush()
                _cache_command(root, session.id)  # the checkpoint of the shorter log
            session.append(
                event.type, event.data, surface_op=event.surface_op, source_seqs=event.source_seqs
            )
        writer.flush()
    path = store.path(session.id)
    return session.id, path, path.with_suffix(".audit").read_bytes()


def measure_grown(steps: int, rounds: int, root: Path, serve: bool) -> dict[str, float]:
    """``cache_grown`` and ``serve_first_view_grown`` (see the module docstring)."""
    session_id, path, kept = _grown(steps, root)
    checkpoint = path.with_suffix(".audit")

    def restore() -> None:
        checkpoint.write_bytes(kept)  # each run rewrites it for the grown log

    times = {"cache_grown": _median(rounds, lambda: _cache_command(root, session_id), restore)}
    if serve:
        restore()
        times["serve_first_view_grown"] = _first_view(root, session_id)
    return times


def measure(steps: int, rounds: int, root: Path, serve: bool) -> dict[str, Any]:
    session = build(steps, "deepseek")
    store = JsonlStore(root)
    with store.create(session) as writer:
        writer.flush()
    path = store.path(session.id)
    pristine = path.read_bytes()

    def restore() -> None:
        path.write_bytes(pristine)

    parse = _median(rounds, lambda: _parse_every_line(path))
    times = {
        "load": _median(rounds, lambda: store.load(session.id)),
        "verify": _median(rounds, lambda: verify_jsonl(path.read_bytes())),
        "cache": _median(
            rounds, lambda: encode(cache_report(store.load(session.id).session).to_json())
        ),
    }
    # `tapelog cache --json` in process: once to write the checkpoint beside
    # the file, then timed reading it (the bytes are hashed, nothing is loaded).
    _cache_command(root, session.id)
    checkpoint_mb = round(path.with_suffix(".audit").stat().st_size / 1e6, 2)
    times["cache_checkpointed"] = _median(rounds, lambda: _cache_command(root, session.id))
    resumes = []
    for _ in range(rounds):
        restore()
        resumes.append(_resume(store, session.id))
    restore()
    times["resume"] = statistics.median(r for r, _ in resumes)
    times["first_turn"] = statistics.median(f for _, f in resumes)
    if serve:
        checkpoint = path.with_suffix(".audit")
        kept = checkpoint.read_bytes()
        checkpoint.unlink()
        times["serve_first_view"] = _first_view(root, session.id)
        checkpoint.write_bytes(kept)
        times["serve_first_view_checkpointed"] = _first_view(root, session.id)
    times.update(measure_grown(steps, rounds, root / "grown", serve))
    return {
        "steps": steps,
        "events": len(session),
        "messages": len(session.surface),
        "log_mb": round(len(pristine) / 1e6, 2),
        "checkpoint_mb": checkpoint_mb,
        "parse_s": round(parse, 3),
        "seconds": {k: round(v, 3) for k, v in times.items()},
        "over_parse": {k: round(v / parse, 2) for k, v in times.items()},
    }


def miniharness(steps: int, rounds: int) -> dict[str, Any]:
    python = os.environ.get("MINIHARNESS_PYTHON")
    if not python:
        return {"skipped": "MINIHARNESS_PYTHON is not set (see this file's docstring)"}
    if not shutil.which(python):
        return {"skipped": f"MINIHARNESS_PYTHON={python} is not an interpreter"}
    script = str(_HERE / "miniharness_cold.py")
    done = subprocess.run(
        [python, script, str(steps), str(rounds)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"skipped": f"miniharness_cold.py failed: {last}"}
    out: dict[str, Any] = orjson.loads(done.stdout)
    out["over_parse"] = {
        k: round(out[f"{k}_s"] / out["parse_s"], 2) for k in ("resume", "first_turn")
    }
    return out


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[2_500, 10_000])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-serve", action="store_true", help="skip the serve first view")
    args = parser.parse_args(argv)
    sizes = []
    for steps in args.steps:
        with tempfile.TemporaryDirectory() as tmp:
            ours = measure(steps, args.rounds, Path(tmp), not args.no_serve)
        theirs = miniharness(steps, args.rounds)
        ours["miniharness"] = theirs
        if "resume_s" in theirs:
            mine = ours["seconds"]["resume"] + ours["seconds"]["first_turn"]
            ours["tapelog_over_miniharness"] = round(
                mine / (theirs["resume_s"] + theirs["first_turn_s"]), 2
            )
        sizes.append(ours)
    print(encode_str({"rounds": args.rounds, "sizes": sizes}))


if __name__ == "__main__":
    main(sys.argv[1:])
