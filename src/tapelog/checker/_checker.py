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
The body comes as the wire's parts (a ``WireBody``) and is compared with the
shadow's parts pair by pair (:func:`compare_parts`): once a part is found
equal, the shadow's cache keeps the sent object in place of its own
(``BodyCache.adopt``: the same bytes), so on later checks that pair is one
object and is skipped without being read. A part the live side changed is a
new object, compared by content; a check compares what is new.

It also refuses a request the log does explain but no provider accepts: one
holding an assistant message whose tool calls are not all answered before the
next other message (``tapelog.log.unanswered_tool_calls``, the rule repair and
``verify`` keep on the log). Such a log is a bug or damage, and the provider's
400 would come back on every later request; refused here, the step ends
unsent and the log says why. The audit proxy turns this off
(``tool_pairs=False``): it carries other agents' requests as they are.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from itertools import compress
from operator import is_not
from typing import Any

from tapelog._errors import ReconstructionError
from tapelog.checker._compare import differences, first_message_difference, mismatch_error
from tapelog.llm._api import BodyCache, WireBody, WireFormat, wire_for
from tapelog.log._api import Event, History, LogFold, Session, unanswered_tool_calls
from tapelog.request import LlmRequest, build_request, summary_request
from tapelog.request._api import StepFold, compaction_inputs, rebuild_request_at

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

    def __init__(self, session: Session, *, tool_pairs: bool = True) -> None:
        self._session = session
        self._tool_pairs = tool_pairs
        # A freshly loaded session's fold holds only what the log said: start there
        # (the first check after a resume then costs what is new, not the log).
        self._fold = session.shadow_fold()
        self._loop_cache = BodyCache()
        self._one_shot_cache = BodyCache()
        # The leading messages the last check compared equal, as both sides'
        # objects: the next check compares those by identity only.
        self._verified = 0
        self._last_sent: list[Any] = []
        self._last_history: History | None = None
        self._last_prefix: Sequence[Any] = ()
        self.compared_bytes = 0
        """How many body bytes the last check compared by content (the rest it
        knew equal: parts verified on an earlier check, the same objects again)."""

    @property
    def shadow(self) -> LogFold:
        """The shadow's fold (read it only)."""
        return self._fold

    def _catch_up(self, upto: int) -> None:
        events = self._session.events
        fold = self._fold
        for seq in range(fold.folded, upto):
            fold.apply(events[seq])

    def _rebuild(self, request: LlmRequest) -> tuple[LlmRequest, History | None]:
        """The request rebuilt from the log, and (for a loop request) the
        shadow's history it was built from."""
        anchor = request.boundary_seq
        events = self._session.events
        if anchor is None:
            raise ReconstructionError(
                "a request must carry the seq it is anchored at (its step/start or "
                "compact/start); build it with build_request() or summary_request()"
            )
        if not 0 <= anchor < len(events) or anchor < self._fold.folded:
            # Not the newest request: rebuild it the slow way, from scratch.
            return rebuild_request_at(events, anchor, session_id=request.session_id), None
        self._catch_up(anchor)
        fold = self._fold
        nodes = fold.history()
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
            rebuilt = summary_request(
                header=header,
                nodes=nodes,
                region=region,
                instruction=instruction,
                max_tokens=max_tokens,
                session_id=request.session_id,
                anchor_seq=anchor,
            )
            return rebuilt, None
        if start.type != "step/start":
            raise ReconstructionError(f"seq {anchor} is not a step/start event")
        surface, generation = len(fold.surface), fold.replace_generation
        self._catch_up(len(events))
        if len(fold.surface) != surface or fold.replace_generation != generation:
            raise ReconstructionError(
                f"the history changed after the step/start at seq {anchor}, before its "
                "request was sent"
            )
        # The step's header as every audit reads it back: the walk's own step fold
        # (the one encoding of the step-boundary rule).
        step = StepFold(anchor, header)
        for seq in range(anchor + 1, len(events)):
            if not step.feed(events[seq]):
                break
        header = step.header
        if header is None:
            raise ReconstructionError(f"the step at seq {anchor} has no request header")
        rebuilt = build_request(
            header=header, nodes=nodes, session_id=request.session_id, boundary_seq=anchor
        )
        return rebuilt, nodes

    def _first_difference(
        self, rebuilt: LlmRequest, sent: list[Any], history: History | None
    ) -> int | None:
        """The first message that differs, comparing only what the last check did not.

        The live messages the last check found equal are compared with the
        checker's own list of them (:func:`_leads`: C-level list equality, an
        identity test for objects that did not change); on the shadow's side
        its own history proves it (:meth:`History.extends`: the same lists,
        only appended to). Where both hold, those messages are still equal;
        the rest are compared by their canonical bytes.
        """
        k = self._verified
        prefix = rebuilt.header.prefix
        if not (
            k
            and history is not None
            and self._last_history is not None
            and history.extends(self._last_history)
            and prefix == self._last_prefix
            and len(sent) >= k
            and _leads(self._last_sent, k, sent)
        ):
            k = 0
        index = first_message_difference(rebuilt.messages, sent, k)
        if index is None and history is not None:
            if not k:  # (else _leads made the list the sent one already)
                self._last_sent = list(sent)
            self._verified = len(sent)
            self._last_history, self._last_prefix = history, prefix
        elif index is None:
            self._verified = 0  # a one-shot: the next loop check starts over
        return index

    def _check_tool_pairs(self, rebuilt: LlmRequest, history: History | None) -> None:
        """Refuse a request that holds tool calls without their results.

        Only the messages the last check did not see are scanned when the
        history only grew since (that check found every call answered by its
        end, so the scan starts from nothing pending); otherwise all of them,
        the header's prefix first.
        """
        if not self._tool_pairs:
            return
        prefix = rebuilt.header.prefix
        if (
            self._verified
            and history is not None
            and self._last_history is not None
            and history.extends(self._last_history)
            and prefix == self._last_prefix
        ):
            messages: Sequence[Any] = rebuilt.messages[self._verified :]
        else:
            messages = [*prefix, *rebuilt.messages]
        unanswered = unanswered_tool_calls(messages)
        if unanswered:
            raise ReconstructionError(
                f"{_what(rebuilt)} would hold tool calls without their results "
                f"({', '.join(unanswered)}): every provider refuses such a request, so it is "
                "not sent; the log has an assistant message whose tool calls were never "
                "answered (`tapelog verify` says where)"
            )

    def check(self, request: LlmRequest, body: bytes | WireBody) -> None:
        """Raise :class:`ReconstructionError` unless the log explains ``request`` and
        ``body``, or the request holds tool calls without their results."""
        rebuilt, history = self._rebuild(request)
        self._check_tool_pairs(rebuilt, history)
        wire = wire_for(rebuilt.config)
        cache = self._one_shot_cache if request.one_shot else self._loop_cache
        parts = wire.encode_parts(rebuilt, cache=cache)
        index = self._first_difference(rebuilt, request.messages, history)
        same_header = rebuilt.header.canonical_bytes() == request.header.canonical_bytes()
        same_seqs = request.node_seqs == rebuilt.node_seqs
        sent = body.parts if isinstance(body, WireBody) else (body,)
        same, self.compared_bytes, equal = compare_parts(sent, parts)
        if index is None and same_header and same_seqs and same:
            # The shadow keeps the sent objects for the parts it just found equal
            # (the same bytes: its next bodies are unchanged), so next time those
            # pairs are one object and are skipped; and it holds no copy of its own.
            cache.adopt(equal)
            return
        expected_body = b"".join(parts)
        problems = differences(rebuilt, request, expected_body, bytes(body), message_index=index)
        if problems:
            raise mismatch_error(request, problems)


def _leads(own: list[Any], k: int, sent: list[Any]) -> bool:
    """Whether ``own[:k]`` leads ``sent`` item for item (the same objects, or
    equal); if so ``own`` is made ``sent``'s items, else left as ``own[:k]``.

    ``sent[:k] == own[:k]`` would copy both prefixes, taking a reference to
    every old message: a touch of each object, the cost of a long history.
    Extending ``own`` by the new items only and comparing two lists of one
    length reads the two pointer arrays and never an object that did not change.
    """
    del own[k:]
    own.extend(sent[k:])
    if own == sent:
        return True
    del own[k:]
    return False


def _what(request: LlmRequest) -> str:
    anchor = request.boundary_seq
    kind = "the compaction summary request" if request.one_shot else "the request"
    return f"{kind} anchored at seq {anchor}"


def compare_parts(
    sent: Sequence[bytes], shadow: Sequence[bytes]
) -> tuple[bool, int, dict[int, bytes]]:
    """Whether two part lists are the same bytes; the bytes compared by content;
    and, when they are, the shadow's parts that were not the sent objects, by
    ``id``, mapped to their sent equals (what the shadow may adopt).

    When both sides cut the body the same way (the same wire code: the usual
    case) the parts are compared pair by pair at C speed: a pair that is one
    object is one ``bytes`` (immutable), so it is skipped without reading it,
    every other pair is compared by content. Any other cut is compared in full.
    """
    if len(sent) == len(shadow) and tuple(sent) == tuple(shadow):
        # The pairs that are two objects, picked at C speed (most are one object).
        new = list(compress(zip(sent, shadow, strict=True), map(is_not, sent, shadow)))
        return True, sum(len(a) for a, _ in new), {id(b): a for a, b in new}
    return same_bytes(b"".join(sent), shadow), sum(map(len, shadow)), {}


def same_bytes(body: bytes, parts: Sequence[bytes]) -> bool:
    """Whether ``body`` is the concatenation of ``parts``, without building it."""
    if len(body) != sum(map(len, parts)):
        return False
    offset = 0
    for part in parts:
        if not body.startswith(part, offset):
            return False
        offset += len(part)
    return True


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
