"""The invariant checker: a request the log cannot explain is never sent.

On in development mode (the test suite, ``--check``, ``TAPELOG_CHECK=1``). For
each loop request it rebuilds the request from a *fresh* Session over the log
prefix up to the step boundary plus the step's folded header, and compares the
messages, every header field and the serialized wire bytes with what is about
to be sent. One-shot calls (the compaction summary) are marked and skipped.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Sequence

from tapelog._errors import ReconstructionError
from tapelog.audit._rebuild import rebuild_request_at
from tapelog.llm._types import LlmRequest, WireFormat
from tapelog.log import Event, encode

__all__ = ["check_enabled", "check_request"]


def check_enabled(explicit: bool | None = None) -> bool:
    """``explicit`` if given, else ``TAPELOG_CHECK``: set to anything but an
    empty value, ``0``, ``false``, ``no`` or ``off`` turns the checker on (a
    typo should check too much, not silently too little)."""
    if explicit is not None:
        return explicit
    value = os.environ.get("TAPELOG_CHECK", "").strip().lower()
    return value not in ("", "0", "false", "no", "off")


def _diff(label: str, expected: bytes, actual: bytes) -> str:
    exp = expected.decode("utf-8", "replace").replace("},{", "},\n{").splitlines()
    act = actual.decode("utf-8", "replace").replace("},{", "},\n{").splitlines()
    lines = list(
        difflib.unified_diff(
            exp, act, f"{label} rebuilt from log", f"{label} about to be sent", lineterm="", n=1
        )
    )
    shown = "\n".join(lines[:40])
    more = f"\n... ({len(lines) - 40} more diff lines)" if len(lines) > 40 else ""
    return shown + more


def check_request(
    events: Sequence[Event],
    request: LlmRequest,
    body: bytes,
    wire: WireFormat,
) -> None:
    """Raise :class:`ReconstructionError` unless the log explains ``request`` and ``body``."""
    if request.one_shot:
        return
    if request.boundary_seq is None:
        raise ReconstructionError(
            "a loop request must carry its step/start boundary seq; build it with build_request()"
        )
    rebuilt = rebuild_request_at(events, request.boundary_seq, session_id=request.session_id)
    problems: list[str] = []
    if encode(list(rebuilt.messages)) != encode(list(request.messages)):
        problems.append(
            "messages differ:\n"
            + _diff("messages", encode(list(rebuilt.messages)), encode(list(request.messages)))
        )
    live_header = request.header.to_json()
    for field in ("config", "system", "tools", "prefix"):
        want, got = rebuilt.header.to_json().get(field), live_header.get(field)
        if encode(want) != encode(got):
            problems.append(
                f"header.{field} differs:\n" + _diff(f"header.{field}", encode(want), encode(got))
            )
    expected_body = wire.encode_body(rebuilt)
    if expected_body != body:
        problems.append("wire bytes differ:\n" + _diff("body", expected_body, body))
    if problems:
        raise ReconstructionError(
            f"request at step/start seq {request.boundary_seq} of session "
            f"{request.session_id} cannot be rebuilt from the log; it was not sent.\n"
            + "\n".join(problems)
        )
