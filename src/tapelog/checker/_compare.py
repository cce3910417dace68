"""Comparing a request about to be sent with its rebuild, and saying what differs."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any

from tapelog._errors import ReconstructionError
from tapelog.log import encode
from tapelog.request import LlmRequest

__all__ = ["differences", "mismatch_error", "unified_diff"]

_HEADER_FIELDS = ("config", "system", "tools", "prefix")


def unified_diff(label: str, expected: bytes, actual: bytes) -> str:
    """A short unified diff of two JSON texts, one object per line."""
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


def header_differences(rebuilt: LlmRequest, request: LlmRequest) -> list[str]:
    """Every header field whose canonical bytes differ, with a diff."""
    problems: list[str] = []
    want_header, got_header = rebuilt.header.to_json(), request.header.to_json()
    for field in _HEADER_FIELDS:
        want, got = encode(want_header.get(field)), encode(got_header.get(field))
        if want != got:
            problems.append(
                f"header.{field} differs:\n" + unified_diff(f"header.{field}", want, got)
            )
    return problems


def message_difference(rebuilt: Sequence[Any], sent: Sequence[Any], index: int | None) -> list[str]:
    """The message problem at ``index`` (``None``: none), with a diff of the lists."""
    if index is None:
        return []
    return [
        f"messages differ (first at index {index}):\n"
        + unified_diff("messages", encode(list(rebuilt)), encode(list(sent)))
    ]


def first_message_difference(
    rebuilt: Sequence[Any], sent: Sequence[Any], start: int = 0
) -> int | None:
    """Index of the first message from ``start`` on whose bytes differ, or ``None``."""
    if len(rebuilt) != len(sent):
        start = 0
    for i in range(start, max(len(rebuilt), len(sent))):
        if i >= len(rebuilt) or i >= len(sent):
            return i
        a, b = rebuilt[i], sent[i]
        if a is not b and encode(a) != encode(b):
            return i
    return None


def differences(
    rebuilt: LlmRequest,
    request: LlmRequest,
    expected_body: bytes,
    body: bytes,
    *,
    message_index: int | None,
) -> list[str]:
    """What differs between the rebuild and the request about to be sent."""
    problems = message_difference(rebuilt.messages, request.messages, message_index)
    if rebuilt.node_seqs != request.node_seqs and not problems:
        problems.append(
            "the messages come from other log events than the rebuild's "
            f"(node seqs {list(request.node_seqs)[-5:]} vs {list(rebuilt.node_seqs)[-5:]})"
        )
    problems.extend(header_differences(rebuilt, request))
    if expected_body != body:
        problems.append("wire bytes differ:\n" + unified_diff("body", expected_body, body))
    return problems


def mismatch_error(request: LlmRequest, problems: Sequence[str]) -> ReconstructionError:
    what = "one-shot request anchored at seq" if request.one_shot else "request at step/start seq"
    return ReconstructionError(
        f"{what} {request.boundary_seq} of session {request.session_id} cannot be rebuilt "
        "from the log; it was not sent.\n" + "\n".join(problems)
    )
