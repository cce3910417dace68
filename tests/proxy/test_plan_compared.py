"""``plan_messages`` with a session's last comparison (``Compared``) plans exactly
what it plans without one: the shortcut only skips comparing again what the
previous request of the session already found equal to the log."""

from __future__ import annotations

from typing import Any

from hypothesis import assume, given
from hypothesis import strategies as st

from tapelog._errors import ProxyError
from tapelog.log._api import FrozenDict, History, freeze
from tapelog.proxy._exchange import Compared, plan_messages

_TEXTS = st.sampled_from(["a", "b", "c", "d"])
_MESSAGES = st.lists(
    st.tuples(st.sampled_from(["user", "assistant"]), _TEXTS), min_size=0, max_size=10
)


def _message(role: str, text: str) -> FrozenDict:
    value: Any = freeze({"role": role, "content": [{"type": "text", "text": text}]})
    return value  # type: ignore[no-any-return]


def _loosely_same(a: FrozenDict, b: FrozenDict) -> bool:
    """Stands for the translator's looser sameness: texts "a" and "b" pass for each other."""
    loose = {"a": "a", "b": "a"}
    ta, tb = a["content"][0]["text"], b["content"][0]["text"]
    return bool(a["role"] == b["role"] and loose.get(ta, ta) == loose.get(tb, tb))


@given(
    logged=_MESSAGES,
    cut=st.integers(0, 10),
    first=_MESSAGES,
    keep=st.integers(0, 12),
    more=_MESSAGES,
    appended=_MESSAGES,
    replaced=st.booleans(),
)
def test_a_plan_with_the_last_comparison_is_the_plan_without_it(
    logged: list[tuple[str, str]],
    cut: int,
    first: list[tuple[str, str]],
    keep: int,
    more: list[tuple[str, str]],
    appended: list[tuple[str, str]],
    replaced: bool,
) -> None:
    log = [_message(*m) for m in logged]  # the log's own objects, equal in value
    seqs = list(range(len(log)))
    client = [_message(*m) for m in logged[:cut] + first]  # often the log's history, and more
    assume(client or not log)  # else refused: no comparison to remember
    earlier = plan_messages(History(seqs, log, len(log)), client, _loosely_same)
    compared = Compared(client, earlier.equal, generation=0)
    assert client[: earlier.equal] == log[: earlier.equal]
    # The session grew (the answer, the next messages); the client resends
    # what it sent (the same objects, as the translator hands them on) and more.
    log += [_message(*m) for m in appended]
    if replaced and log:  # a replace rewrote the surface: the generation says so
        log[0] = _message("assistant", "d")
    seqs = list(range(len(log)))
    history = History(seqs, log, len(log))
    again = client[:keep] + [_message(*m) for m in more]
    generation = 1 if replaced else 0
    with_it = _outcome(history, again, compared, generation)
    assert with_it == _outcome(history, again)
    if not isinstance(with_it, str):
        equal = plan_messages(history, again, _loosely_same, compared, generation).equal
        assert again[:equal] == log[:equal], "what it vouches for next time"


def _outcome(history: History, client: list[FrozenDict], *compared: Any) -> tuple[Any, ...] | str:
    """The plan's decisions (its ``equal`` is only a lower bound), or the refusal."""
    try:
        plan = plan_messages(history, client, _loosely_same, *compared)
    except ProxyError as exc:
        return str(exc)
    return (plan.start, plan.replace_seq, plan.changed)
