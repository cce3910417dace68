"""The one-expression checks of the commonest payloads (``assistant/chunk``,
``step/*``) accept and refuse exactly what the full checks do.

A store hands decoded payloads (plain dicts) to :func:`check_payload`, an
append frozen ones; both take the fast path. The same payload behind a
read-only view (``MappingProxyType``: a mapping, but not a JSON object type)
goes the long way, so comparing the two compares the paths.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tapelog._errors import EventError
from tapelog.log import _payloads as payloads
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
    expected = _outcome(etype, MappingProxyType(data))
    assert _outcome(etype, data) == expected
    assert _outcome(etype, freeze(data)) == expected


def test_a_read_only_view_takes_the_long_way(monkeypatch: pytest.MonkeyPatch) -> None:
    """The premise of the property: a view is checked by the full checks."""
    calls: list[str] = []
    real = payloads._need

    def counted(etype: str, data: Any, key: str, kind: Any) -> Any:
        calls.append(key)
        return real(etype, data, key, kind)

    monkeypatch.setattr(payloads, "_need", counted)
    data = {"turn": 1, "step": 1, "chunk": {"kind": "text"}}
    check_payload("assistant/chunk", data)
    check_payload("assistant/chunk", freeze(data))
    assert calls == []
    check_payload("assistant/chunk", MappingProxyType(data))
    assert calls == ["turn", "step", "chunk"]
