"""Property tests: frozen values refuse every mutation, still encode, and
freeze/encode/decode round-trips arbitrary JSON byte for byte, key order kept."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given, settings

from tapelog import FrozenError
from tapelog.log import decode, encode
from tapelog.log._api import FrozenDict, FrozenList, freeze, thaw

from ._strategies import json_values

DICT_MUTATORS: dict[str, Callable[[dict[str, Any]], object]] = {
    "setitem": lambda d: d.__setitem__("k", 1),
    "delitem": lambda d: d.__delitem__(next(iter(d), "k")),
    "ior": lambda d: d.__ior__({"k": 1}),
    "clear": lambda d: d.clear(),
    "pop": lambda d: d.pop(next(iter(d), "k")),
    "pop-default": lambda d: d.pop("k", None),
    "popitem": lambda d: d.popitem(),
    "setdefault": lambda d: d.setdefault("k", 1),
    "update": lambda d: d.update(k=1),
    "update-empty": lambda d: d.update({}),
}

LIST_MUTATORS: dict[str, Callable[[list[Any]], object]] = {
    "setitem": lambda v: v.__setitem__(0, 1),
    "setslice": lambda v: v.__setitem__(slice(0, 0), [1]),
    "delitem": lambda v: v.__delitem__(0),
    "delslice": lambda v: v.__delitem__(slice(None)),
    "iadd": lambda v: v.__iadd__([1]),
    "imul": lambda v: v.__imul__(2),
    "append": lambda v: v.append(1),
    "extend": lambda v: v.extend([1]),
    "insert": lambda v: v.insert(0, 1),
    "pop": lambda v: v.pop(),
    "remove": lambda v: v.remove(1),
    "clear": lambda v: v.clear(),
    "sort": lambda v: v.sort(),
    "reverse": lambda v: v.reverse(),
}


def _containers(value: Any) -> Iterator[Any]:
    if isinstance(value, dict):
        yield value
        for v in value.values():
            yield from _containers(v)
    elif isinstance(value, list):
        yield value
        for v in value:
            yield from _containers(v)


def _key_orders(value: Any) -> Any:
    """The value's shape with every object's keys in order (what key order means)."""
    if isinstance(value, dict):
        return [(k, _key_orders(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [_key_orders(v) for v in value]
    return type(value).__name__


@settings(deadline=None)
@given(json_values)
def test_frozen_values_refuse_every_mutation_at_every_depth(value: Any) -> None:
    frozen = freeze({"root": value, "list": [value]})
    before = encode(frozen)
    for container in _containers(frozen):
        assert type(container) in (FrozenDict, FrozenList)
        mutators = DICT_MUTATORS if isinstance(container, dict) else LIST_MUTATORS
        for name, mutate in mutators.items():
            with pytest.raises(FrozenError, match=r"is frozen: logged data cannot be changed"):
                mutate(container)
            assert encode(frozen) == before, name
    assert copy.copy(frozen) is frozen
    assert copy.deepcopy(frozen) is frozen
    assert hash(frozen) == hash(freeze(thaw(frozen)))


@settings(deadline=None)
@given(json_values)
def test_freeze_encode_decode_round_trips_byte_exactly(value: Any) -> None:
    frozen = freeze(value)
    assert frozen == value
    assert _key_orders(frozen) == _key_orders(value)
    data = encode(value)
    assert encode(frozen) == data
    decoded = decode(data)
    assert decoded == value
    assert _key_orders(decoded) == _key_orders(value)
    assert encode(decoded) == data
    assert encode(freeze(decoded)) == data
    thawed = thaw(frozen)
    assert type(thawed) is type(value) or not isinstance(value, (dict, list))
    assert encode(thawed) == data
