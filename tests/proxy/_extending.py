"""The driver the incremental-translation property tests share (chat in
``test_prefix_reuse``, Responses in ``test_responses_prefix``): a run of
requests as the proxy sees them, each extending the conversation, branching
back to an earlier point, or changing a leading field so only the remembered
message bytes match. Whatever the wire, a warm translation must equal a fresh
full one, and a body refused whole must be refused as an extension too."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import pytest
from hypothesis import strategies as st

from tapelog._errors import ProxyError
from tapelog.log import encode
from tapelog.proxy._translate import Messages

T = TypeVar("T")
Step = tuple[str, list[dict[str, Any]], int]


def steps_of(item: st.SearchStrategy[dict[str, Any]], kinds: list[str]) -> st.SearchStrategy[Step]:
    """One request's change: its kind (``extend``, ``branch``, ``field``), the
    items it adds, and where a branch cuts."""
    return st.tuples(
        st.sampled_from(kinds), st.lists(item, min_size=1, max_size=3), st.integers(0, 50)
    )


class Conversation:
    """The items the next request carries, and its leading field."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.temperature = 0

    def take(self, step: Step) -> None:
        kind, added, cut = step
        if kind == "branch" and self.items:
            del self.items[cut % len(self.items) :]
        elif kind == "field":
            self.temperature += 1
        self.items.extend(added)

    def drop(self, step: Step) -> None:
        """Take back a step whose request was refused (the client would not resend it)."""
        del self.items[len(self.items) - len(step[1]) :]


def translated(translate: Callable[[], T]) -> T | ProxyError:
    """What ``translate()`` returned, or the :class:`ProxyError` it refused with."""
    try:
        return translate()
    except ProxyError as exc:
        return exc


def assert_refused_alike(full: ProxyError, warm: Callable[[], object]) -> None:
    """A body refused whole is refused as an extension too, with the same words."""
    with pytest.raises(ProxyError) as refused:
        warm()
    assert str(refused.value) == str(full)


def assert_same_messages(a: Messages, b: Messages) -> None:
    """Two translations of one body agree in everything a request is made of."""
    assert encode(a.neutral) == encode(b.neutral)
    assert a.keys == b.keys
    assert a.origin == b.origin
    assert a.rules == b.rules
    assert a.chain == b.chain
