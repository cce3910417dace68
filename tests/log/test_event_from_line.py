"""The store's fast envelope path agrees with the full one (issue 20).

``event_from_line`` is ``event_from_json`` for a canonical line without the
error locations: whatever it builds, the full path builds equal (same bytes);
whatever the full path refuses, it leaves to the full path (``None``).
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tapelog import LogError
from tapelog.log._api import encode_trusted, event_from_json, event_from_line

_TYPES = ["turn/start", "step/end", "assistant/chunk", "user/message", "tool/result", "x/y", 3]
_values = st.one_of(
    st.none(), st.booleans(), st.integers(-2, 5), st.text(max_size=3), st.just([]), st.just({})
)
_data = st.dictionaries(st.sampled_from(["turn", "step", "content", "chunk"]), _values, max_size=3)
_ops = st.one_of(st.none(), st.just("append"), st.just({"op": "replace", "start": 0, "end": 1}))


def _mostly(valid: st.SearchStrategy[Any], invalid: st.SearchStrategy[Any]) -> Any:
    """``valid`` three times in four: most envelopes are wrong in one place at most."""
    return st.integers(0, 3).flatmap(lambda n: invalid if n == 0 else valid)


@st.composite
def envelopes(draw: st.DrawFn) -> Any:
    obj: dict[str, Any] = {
        "seq": draw(_mostly(st.integers(0, 9), st.sampled_from([-1, "1", None, True]))),
        "time": draw(_mostly(st.integers(0, 9), st.sampled_from([0.5, None, "1"]))),
        "type": draw(st.sampled_from(_TYPES)),
        "data": draw(_mostly(_data, st.sampled_from([[1], None, "x"]))),
    }
    keys = draw(st.sampled_from([(), ("surface_op",), ("surface_op", "source_seqs")]))
    for key in keys:
        obj[key] = draw(_ops if key == "surface_op" else st.one_of(st.none(), st.just([0])))
    if draw(st.integers(0, 3)) == 0:  # a reordered or unknown key now and then
        obj = dict(reversed(list(obj.items()))) if draw(st.booleans()) else {**obj, "extra": 1}
    return draw(_mostly(st.just(obj), st.sampled_from([[obj], None])))


@settings(max_examples=400)
@given(envelopes())
def test_the_fast_path_builds_what_the_full_path_builds_or_steps_aside(obj: Any) -> None:
    line = encode_trusted(obj)
    fast = event_from_line(obj, line)
    try:
        full = event_from_json(obj, decoded=True, line=line, canonical=True)
    except LogError:
        assert fast is None
        return
    if fast is not None:
        assert fast == full
        assert type(fast) is type(full)
        assert fast.encode() == full.encode() == line
