"""Canonical JSON and freeze: every refusal names the offending path."""

from __future__ import annotations

import enum
import pickle
import re
from decimal import Decimal
from typing import Any

import pytest

from tapelog import JsonValueError
from tapelog.log import decode, encode
from tapelog.log._api import FrozenDict, FrozenList, encode_str, freeze, thaw
from tapelog.log._canonical import digest


class Color(enum.StrEnum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


def _nested(leaf: Any) -> dict[str, Any]:
    return {"content": [{"text": "a"}, {"text": "b"}, {"text": leaf}]}


@pytest.mark.parametrize(
    ("leaf", "problem"),
    [
        (float("nan"), "nan is not valid JSON (NaN and infinities are refused)"),
        (float("inf"), "inf is not valid JSON (NaN and infinities are refused)"),
        (float("-inf"), "-inf is not valid JSON (NaN and infinities are refused)"),
        (2**64, "integer 18446744073709551616 does not fit in 64 bits"),
        (-(2**63) - 1, "integer -9223372036854775809 does not fit in 64 bits"),
        ("ok \ud800", "string is not valid UTF-8 (lone surrogate)"),
        ({1, 2}, "set is not a JSON type"),
        (b"bytes", "bytes is not a JSON type"),
        (Decimal("1.5"), "Decimal is not a JSON type"),
        (object(), "object is not a JSON type"),
        ({"x": {3: "v"}}, "key 3 is a int; JSON keys must be strings"),
    ],
)
def test_freeze_refuses_lossy_values_naming_the_path(leaf: Any, problem: str) -> None:
    path = "data.content[2].text" + (".x" if isinstance(leaf, dict) else "")
    with pytest.raises(JsonValueError, match=re.escape(f"{path}: {problem}")) as info:
        freeze(_nested(leaf), path="data")
    assert info.value.path == path
    assert info.value.problem == problem
    # encode() validates plain values the same way before orjson sees them.
    with pytest.raises(JsonValueError, match=re.escape(f"{path}: {problem}")):
        encode(_nested(leaf), path="data")


def test_non_string_key_at_the_top() -> None:
    with pytest.raises(JsonValueError, match=r"^value: key None is a NoneType; JSON keys"):
        freeze({None: 1})


def test_integer_bounds_are_inclusive() -> None:
    assert encode([2**64 - 1, -(2**63)]) == b"[18446744073709551615,-9223372036854775808]"


def test_a_dict_cycle_is_refused_where_it_closes() -> None:
    loop: dict[str, Any] = {"a": [1]}
    loop["a"].append({"back": loop})
    with pytest.raises(JsonValueError, match=r"^data\.a\[1\]\.back: value contains itself"):
        freeze(loop, path="data")


def test_a_list_cycle_is_refused() -> None:
    loop: list[Any] = [0]
    loop.append(loop)
    with pytest.raises(JsonValueError, match=r"^data\[1\]: value contains itself \(a cycle\)"):
        freeze(loop, path="data")


def test_nesting_too_deep_without_a_cycle_is_refused() -> None:
    deep: Any = "leaf"
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(JsonValueError, match=r"^data: value is nested too deeply"):
        freeze(deep, path="data")


@pytest.mark.parametrize(
    "text",
    [b"NaN", b'{"a": Infinity}', b'{"a": -Infinity}', b'"\xff"', b"{", b'"\\ud800"'],
)
def test_decode_is_strict(text: bytes) -> None:
    with pytest.raises(JsonValueError, match=r"^line 3: not valid JSON \("):
        decode(text, path="line 3")


def test_frozen_constructors_validate_keys_and_values() -> None:
    with pytest.raises(JsonValueError, match=r"^value: key 1 is a int"):
        FrozenDict({1: "a"})
    with pytest.raises(JsonValueError, match=r"^value\.a\.b: nan is not valid JSON"):
        FrozenDict(a={"b": float("nan")})
    with pytest.raises(JsonValueError, match=r"^value\[1\]\.x: inf is not valid JSON"):
        FrozenList([1, {"x": float("inf")}])
    built = FrozenDict({"a": [{"b": 1}]}, c=(2,))
    assert type(built["a"]) is FrozenList
    assert type(built["a"][0]) is FrozenDict
    assert built["c"] == [2]


def test_encoding_is_compact_utf8_and_keeps_key_order() -> None:
    value = {"z": 1, "a": [True, None, 1.5, "é☃"], "m": {"y": 0, "b": -0.0}}
    assert encode(value) == '{"z":1,"a":[true,null,1.5,"é☃"],"m":{"y":0,"b":-0.0}}'.encode()
    assert encode_str(value) == encode(value).decode()
    assert list(freeze(value)) == ["z", "a", "m"]
    assert digest(value).startswith("sha256:")
    assert digest(value) == digest(freeze(value))
    assert digest({"a": 1, "b": 2}) != digest({"b": 2, "a": 1})


def test_freeze_normalises_json_like_types() -> None:
    frozen = freeze({"t": (1, 2), "s": Color.RED, "i": Level.HIGH, "b": True})
    assert type(frozen["t"]) is FrozenList
    assert type(frozen["s"]) is str
    assert type(frozen["i"]) is int
    assert frozen["b"] is True
    assert encode(frozen) == b'{"t":[1,2],"s":"red","i":3,"b":true}'


def test_frozen_values_are_returned_as_they_are() -> None:
    frozen = freeze({"a": [1]})
    assert freeze(frozen) is frozen
    assert freeze([frozen])[0] is frozen


def test_thaw_gives_an_independent_mutable_copy() -> None:
    frozen = freeze({"a": [{"b": 1}]})
    plain = thaw(frozen)
    assert type(plain) is dict
    assert type(plain["a"]) is list
    assert type(plain["a"][0]) is dict
    plain["a"][0]["b"] = 2
    assert frozen["a"][0]["b"] == 1


def test_frozen_values_pickle_and_repr() -> None:
    frozen = freeze({"a": [1, {"b": None}]})
    back = pickle.loads(pickle.dumps(frozen))
    assert type(back) is FrozenDict
    assert type(back["a"]) is FrozenList
    assert back == frozen
    assert repr(frozen) == "FrozenDict({'a': FrozenList([1, FrozenDict({'b': None})])})"
