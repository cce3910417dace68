"""The one-expression checks of the commonest payloads (``assistant/chunk``,
``step/*``) accept and refuse exactly what the full checks do.

A store hands decoded payloads (plain dicts) to :func:`check_payload`, which
takes the fast path; a frozen copy of the same payload is not a plain dict and
goes the long way, so comparing the two compares the paths.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tapelog._errors import EventError
from tapelog.log._api import freeze
from tapelog.log._payloads import check_payload

_MISSING = object()
# Mostly what a log holds (so the fast path is taken), sometimes a wrong type or
# a missing key (so both paths must refuse, with the same sentence).
_VALUES = st.sampled_from([0, 1, 2, 3, 7, None, True, False, "1", [], {}, 1.5, _MISSING])
_KINDS = st.sampled_from(["text", "reasoning", "", None, 3, True, [], _MISSING])
_CHUNKS = st.one_of(
    st.builds(lambda kind: {} if kind is _MISSING else {"kind": kind}, _KINDS),
    _VALUES,
)


@st.composite
def _payloads(draw: st.DrawFn) -> dict[str, Any]:
    drawn = {"turn": draw(_VALUES), "step": draw(_VALUES), "chunk": draw(_CHUNKS)}
    return {k: v for k, v in drawn.items() if v is not _MISSING}


def _outcome(etype: str, data: Any) -> str | None:
    try:
        check_payload(etype, data)
    except EventError as exc:
        return str(exc)
    return None


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["assistant/chunk", "step/start", "step/end"]), _payloads())
def test_the_fast_path_decides_as_the_full_checks(etype: str, data: dict[str, Any]) -> None:
    assert _outcome(etype, data) == _outcome(etype, freeze(data))


def test_a_frozen_payload_takes_the_long_way() -> None:
    """The premise of the property: a frozen payload is not a plain dict."""
    frozen = freeze({"turn": 1, "step": 1, "chunk": {"kind": "text"}})
    assert type(frozen) is not dict
    assert type(frozen["chunk"]) is not dict  # (the fast paths test type(data) is dict)
