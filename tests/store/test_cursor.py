"""The summaries' cursor is kept on disk by readers (serve's index file): its
JSON form round-trips exactly, through the one canonical encoder, and anything
else is refused rather than trusted."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tapelog.log import decode, encode
from tapelog.store._api import Cursor

_INTS = st.integers(min_value=-(2**63), max_value=2**63 - 1)


@given(st.lists(_INTS, max_size=4), _INTS, st.text(max_size=130))
def test_a_cursor_round_trips_through_its_json_form(key: list[int], offset: int, tail: str) -> None:
    cursor = Cursor(tuple(key), offset, tail)
    assert Cursor.from_json(decode(encode(cursor.to_json()))) == cursor


@pytest.mark.parametrize(
    "obj",
    [
        None,
        [],
        {"key": [1], "offset": 2},
        {"key": [1], "offset": 2, "tail": "", "more": 1},
        {"key": [True], "offset": 2, "tail": ""},
        {"key": [1.5], "offset": 2, "tail": ""},
        {"key": "1", "offset": 2, "tail": ""},
        {"key": [1], "offset": "2", "tail": ""},
        {"key": [1], "offset": 2, "tail": None},
    ],
)
def test_anything_but_a_cursor_is_refused(obj: Any) -> None:
    with pytest.raises(ValueError, match="cursor"):
        Cursor.from_json(obj)
