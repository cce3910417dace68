"""The invariant checker: a request the log cannot explain is never sent.

For every request the loop (or a compaction) is about to send, the checker
rebuilds it from the logged events alone and compares the messages, every
header field and the wire bytes; any difference raises
:class:`ReconstructionError` and nothing is sent (docs/architecture.md,
"Invariants").

The live session's caches must not vouch for themselves, so the checker keeps
a shadow of its own: a :class:`tapelog.log.LogFold` fed only the logged events,
its own projection, its own header fold and its own wire-piece caches, with the
wire format chosen from the rebuilt config alone (``wire_for``). Each check
folds the events logged since the last one and encodes only the messages that
are new, so a check costs what is new, not the session's length
(``bench/bench_loop.py`` measures it). That is what lets it be on by default.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from itertools import islice
from operator import is_
from typing import Any

from tapelog._errors import ReconstructionError
from tapelog.checker._compare import differences, first_message_difference, mismatch_error
from tapelog.llm import BodyCache, WireFormat, wire_for
from tapelog.log import Event, LogFold, Session
from tapelog.request import (
    LlmRequest,
    build_request,
    compaction_inputs,
    rebuild_request_at,
    summary_request,
)

__all__ = ["RequestChecker", "check_enabled", "check_request"]


def check_enabled(explicit: bool | None = None, *, default: bool = True) -> bool:
    """``explicit`` if given, else ``TAPELOG_CHECK``, else ``default`` (on).

    ``TAPELOG_CHECK`` set to ``0``, ``false``, ``no`` or ``off`` turns the
    checker off; any other non-empty value turns it on (a typo should check too
    much, not silently too little).
    """
    if explicit is not None:
        return explicit
    value = os.environ.get("TAPELOG_CHECK", "").strip().lower()
    if not value:
        return default
    return value not in ("0", "false", "no", "off")


class RequestChecker:
    """The shadow rebuild of one session's requests (see the module docstring)."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self._fold = LogFold()
        self._loop_cache = BodyCache()
        self._one_shot_cache = BodyCache()
        # The leading messages the last check compared equal, as both sides'
        # objects: the next check compares those by identity only.
        self._verified = 0
        self._last_sent: Sequence[Any] = ()
        self._last_rebuilt: Sequence[Any] = ()

    def _catch_up(self, upto: int) -> None:
        events = self._session.events
        fold = self._fold
        for seq in range(len(fold.events), upto):
            fold.apply(events[seq])

    def _rebuild(self, request: LlmRequest) -> LlmRequest:
        anchor = request.boundary_seq
        events = self._session.events
        if anchor is None:
            raise ReconstructionError(
                "a request must carry the seq it is anchored at (its step/start or "
                "compact/start); build it with build_request() or summary_request()"
            )
        if not 0 <= anchor < len(events) or anchor < len(self._fold.events):
            # Not the newest request: rebuild it the slow way, from scratch.
            return rebuild_request_at(events, anchor, session_id=request.session_id)
        self._catch_up(anchor)
        fold = self._fold
        nodes = fold.nodes()
        header = fold.header
        start = events[anchor]
        if request.one_shot:
            inputs = compaction_inputs(start.data) if start.type == "compact/start" else None
            if inputs is None:
                raise ReconstructionError(
                    f"seq {anchor} is not a compact/start that names a region to summarise"
                )
            if header is None:
                raise ReconstructionError(f"no request header is logged before seq {anchor}")
            self._catch_up(anchor + 1)
            region, instruction, max_tokens = inputs
            return summary_request(
                header=header,
                nodes=nodes,
                region=region,
                instruction=instruction,
                max_tokens=max_tokens,
                session_id=request.session_id,
                anchor_seq=anchor,
            )
        if start.type != "step/start":
            raise ReconstructionError(f"seq {anchor} is not a step/start event")
        surface, generation = len(fold.surface), fold.replace_generation
        self._catch_up(len(events))
        if len(fold.surface) != surface or fold.replace_generation != generation:
            raise ReconstructionError(
                f"the history changed after the step/start at seq {anchor}, before its "
                "request was sent"
            )
        header = fold.header
        if header is None:
            raise ReconstructionError(f"the step at seq {anchor} has no request header")
        return build_request(
            header=header, nodes=nodes, session_id=request.session_id, boundary_seq=anchor
        )

    def _first_difference(self, rebuilt: Sequence[Any], sent: Sequence[Any]) -> int | None:
        k = self._verified
        if not (
            k <= len(sent)
            and k <= len(rebuilt)
            and all(map(is_, islice(sent, k), self._last_sent))
            and all(map(is_, islice(rebuilt, k), self._last_rebuilt))
        ):
            k = 0
        index = first_message_difference(rebuilt, sent, k)
        if index is None:
            self._verified, self._last_sent, self._last_rebuilt = len(sent), sent, rebuilt
        return index

    def check(self, request: LlmRequest, body: bytes) -> None:
        """Raise :class:`ReconstructionError` unless the log explains ``request`` and ``body``."""
        rebuilt = self._rebuild(request)
        wire = wire_for(rebuilt.config)
        cache = self._one_shot_cache if request.one_shot else self._loop_cache
        expected_body = wire.encode_body(rebuilt, cache=cache)
        index = self._first_difference(rebuilt.messages, request.messages)
        problems = differences(rebuilt, request, expected_body, body, message_index=index)
        if problems:
            raise mismatch_error(request, problems)


def check_request(
    events: Session | Sequence[Event],
    request: LlmRequest,
    body: bytes,
    wire: WireFormat | None = None,
) -> None:
    """Check one request against a whole log, from scratch (O(log)).

    The loop keeps a :class:`RequestChecker` instead, which costs what is new.
    ``wire``, if given, must be the wire format the logged config implies.
    """
    if request.boundary_seq is None:
        raise ReconstructionError(
            "a request must carry the seq it is anchored at (its step/start or "
            "compact/start); build it with build_request() or summary_request()"
        )
    rebuilt = rebuild_request_at(events, request.boundary_seq, session_id=request.session_id)
    expected_wire = wire_for(rebuilt.config)
    expected_body = expected_wire.encode_body(rebuilt)
    index = first_message_difference(rebuilt.messages, request.messages)
    problems = differences(rebuilt, request, expected_body, body, message_index=index)
    if wire is not None and wire != expected_wire:
        problems.insert(
            0, f"the wire {wire!r} is not the one the logged config implies ({expected_wire!r})"
        )
    if problems:
        raise mismatch_error(request, problems)
