"""Deep freezing with lossless-JSON validation in one walk.

Logged data and derived messages are shared between the log, the projection
cache, requests and the audit path, so they must not be mutable: a mutation
through any of them would silently rewrite history. ``freeze`` copies a JSON
value into :class:`FrozenDict` / :class:`FrozenList` (subclasses of ``dict`` and
``list``, so ``==``, ``isinstance`` and orjson keep working without a copy) and
validates that the value is lossless JSON on the way: no NaN or infinities, only
string keys, only JSON types, no cycles, ints within 64 bits, valid UTF-8.

The path of an offending value (``data.content[2].text``) is built only when an
error unwinds, so the happy path pays nothing for it.

The walk is also the log's one choke point for secrets: every content string
it copies goes through :func:`tapelog.log.redact`, so a registered secret (an
API key, a store password) never reaches logged data. Structure is never
redacted: object keys, and the strings of the fields that name or identify
rather than say something (:data:`STRUCTURAL_FIELDS`, any ``*_id``): an event
type, a role or a tool-call id changed to ``***`` would make the log say
something else or not load at all. With no secret known this costs one
attribute test per string.

A secret may be registered after a value was frozen (a ``@tool`` schema frozen
at import, a key the client reads at its first send), so an already-frozen
container is not clean for good: each one remembers the secrets it was made
(or last checked) under, as :func:`tapelog.log.redaction_stamp`, and ``freeze``
returns it as it is only while that stamp is still the one in force; otherwise
it walks it again, and marks it with the new stamp when nothing in it changed
(so the next ``freeze`` is the fast path again). What :func:`freeze_faithful`
and :func:`freeze_decoded` make is a copy of logged data, marked verbatim and
never walked again: rebuilding a log must give its bytes back, whatever the
reader has registered.
"""

from __future__ import annotations

import contextvars
import math
from collections.abc import Iterable, Mapping
from typing import Any, Final, NoReturn, SupportsIndex, TypeAlias

from tapelog._errors import FrozenError, JsonValueError
from tapelog.log._redact import _REGISTRY as _SECRETS
from tapelog.log._redact import redact, redaction_stamp

__all__ = [
    "STRUCTURAL_FIELDS",
    "FrozenDict",
    "FrozenList",
    "JsonValue",
    "concat_frozen",
    "freeze",
    "freeze_decoded",
    "freeze_dict",
    "freeze_faithful",
    "freeze_list",
    "freeze_trusted",
    "thaw",
]

JsonValue: TypeAlias = Any
"""A lossless JSON value: None, bool, int, float, str, list or str-keyed dict."""

STRUCTURAL_FIELDS: Final = frozenset(
    {
        "dialect",
        "finish_reason",
        "id",
        "kind",
        "provider",
        "role",
        "stop_reason",
        "type",
    }
)
"""Fields whose string value is a name, an enum or an id, never redacted (nor is
any field whose name ends in ``_id``); every other string is content."""

_INT_MIN = -(2**63)
_INT_MAX = 2**64 - 1


def _refuse(self: object, *args: object, **kwargs: object) -> NoReturn:
    raise FrozenError(
        f"{type(self).__name__} is frozen: logged data cannot be changed; "
        "use tapelog.thaw() for a mutable copy"
    )


_VERBATIM: Final = -1
"""The stamp of a copy of logged data (decoded from a log, or made by
:func:`freeze_faithful` to rebuild from one): kept as it is, never redacted
again, so whatever is derived from a log stays a pure function of it."""


class FrozenDict(dict[str, Any]):
    """An immutable, deeply frozen ``dict`` of JSON values."""

    __slots__ = ("_stamp",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Freeze the whole mapping, not value by value: the keys need checking too.
        frozen = freeze(dict(*args, **kwargs))
        dict.__init__(self, frozen)
        self._stamp = _stamp_of(frozen)

    __setitem__ = _refuse
    __delitem__ = _refuse
    __ior__ = _refuse
    clear = _refuse
    pop = _refuse
    popitem = _refuse
    setdefault = _refuse
    update = _refuse

    def __copy__(self) -> FrozenDict:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenDict:
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenDict, (dict(self),))

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(self.items()))

    def __repr__(self) -> str:
        return f"FrozenDict({dict.__repr__(self)})"


class FrozenList(list[Any]):
    """An immutable, deeply frozen ``list`` of JSON values."""

    __slots__ = ("_stamp",)

    def __init__(self, items: Iterable[Any] = ()) -> None:
        frozen = freeze(list(items))
        list.__init__(self, frozen)
        self._stamp = _stamp_of(frozen)

    __setitem__ = _refuse
    __delitem__ = _refuse
    __iadd__ = _refuse
    __imul__ = _refuse
    append = _refuse
    extend = _refuse
    insert = _refuse
    pop = _refuse
    remove = _refuse
    clear = _refuse
    sort = _refuse
    reverse = _refuse

    def __copy__(self) -> FrozenList:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenList:
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenList, (list(self),))

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"FrozenList({list.__repr__(self)})"


def _stamp_of(value: FrozenDict | FrozenList) -> int:
    """The stamp ``value`` was made or last checked under (unstamped: decoded, verbatim)."""
    return getattr(value, "_stamp", _VERBATIM)


def _new_dict(items: dict[str, Any], stamp: int) -> FrozenDict:
    obj = dict.__new__(FrozenDict)
    dict.__init__(obj, items)
    obj._stamp = stamp
    return obj


def _new_list(items: list[Any], stamp: int) -> FrozenList:
    obj = list.__new__(FrozenList)
    list.__init__(obj, items)
    obj._stamp = stamp
    return obj


class _Bad(Exception):
    """Internal: carries a problem up the recursion, collecting the path."""

    def __init__(self, problem: str) -> None:
        self.problem = problem
        self.parts: list[str] = []


_FAITHFUL: Final[contextvars.ContextVar[bool]] = contextvars.ContextVar(
    "tapelog_freeze_faithful", default=False
)
"""Set while :func:`freeze_faithful` runs: validate and copy, but never redact."""


def _walk(value: Any, stamp: int, redacting: bool) -> Any:
    """Validate and copy ``value``; redact its content strings when ``redacting``.

    ``stamp`` marks the containers made here: the secrets in force when
    redacting or when no secret is known, :data:`_VERBATIM` when faithful.
    """
    # Exact-type checks first: they are the overwhelmingly common case.
    t = type(value)
    if t is str:
        if not value.isascii():
            _check_utf8(value)
        return redact(value) if redacting else value
    if t is FrozenDict or t is FrozenList:
        if not redacting or _stamp_of(value) in (stamp, _VERBATIM):
            return value
        # Frozen under other secrets than those in force: walk it again below.
    elif value is None or t is bool:
        return value
    elif t is int:
        if value < _INT_MIN or value > _INT_MAX:
            raise _Bad(f"integer {value} does not fit in 64 bits")
        return value
    elif t is float:
        if not math.isfinite(value):
            raise _Bad(f"{value!r} is not valid JSON (NaN and infinities are refused)")
        return value
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        changed = t is not FrozenDict  # only a frozen one may be kept
        for k, v in value.items():
            if type(k) is not str:
                raise _Bad(f"key {k!r} is a {type(k).__name__}; JSON keys must be strings")
            try:
                new = (
                    _structural(v)
                    if redacting and _is_structural(k, v)
                    else _walk(v, stamp, redacting)
                )
            except _Bad as bad:
                bad.parts.append(f".{k}")
                raise
            if not changed and new is not v and new != v:
                changed = True
            out[k] = new
        return _new_dict(out, stamp) if changed else _restamped(value, stamp)
    if isinstance(value, (list, tuple)):
        items: list[Any] = []
        changed = t is not FrozenList
        for i, v in enumerate(value):
            try:
                new = _walk(v, stamp, redacting)
            except _Bad as bad:
                bad.parts.append(f"[{i}]")
                raise
            if not changed and new is not v and new != v:
                changed = True
            items.append(new)
        return _new_list(items, stamp) if changed else _restamped(value, stamp)
    if isinstance(value, str):
        return _walk(str(value), stamp, redacting)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return _walk(int(value), stamp, redacting)
    if isinstance(value, float):
        return _walk(float(value), stamp, redacting)
    to_json = getattr(value, "to_json", None)
    if callable(to_json):  # tapelog's own records (EpochHeader, LlmCallConfig) log as JSON
        return _walk(to_json(), stamp, redacting)
    raise _Bad(f"{type(value).__name__} is not a JSON type")


def _restamped(value: Any, stamp: int) -> Any:
    """A frozen container walked again and found clean: the same object, now
    marked clean under ``stamp`` (its identity kept, its next freeze fast)."""
    value._stamp = stamp
    return value


def _is_structural(key: str, value: Any) -> bool:
    return type(value) is str and (key in STRUCTURAL_FIELDS or key.endswith("_id"))


def _structural(value: str) -> str:
    """A structural string: validated like any other, never redacted."""
    if not value.isascii():
        _check_utf8(value)
    return value


def _check_utf8(value: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise _Bad("string is not valid UTF-8 (lone surrogate)") from None


def _find_cycle(value: Any, active: set[int], path: str) -> str | None:
    if isinstance(value, Mapping):
        items: Iterable[tuple[str, Any]] = ((f"{path}.{k}", v) for k, v in value.items())
    elif isinstance(value, (list, tuple)):
        items = ((f"{path}[{i}]", v) for i, v in enumerate(value))
    else:
        return None
    if id(value) in active:
        return path
    active.add(id(value))
    for sub, v in items:
        found = _find_cycle(v, active, sub)
        if found is not None:
            return found
    active.discard(id(value))
    return None


def freeze(value: Any, *, path: str = "value", _key: str | SupportsIndex | None = None) -> Any:
    """Return a deeply frozen copy of ``value``, refusing anything not lossless JSON.

    ``path`` names the value in error messages, e.g. ``data`` gives errors like
    ``data.content[2].text: nan is not valid JSON``. Already-frozen containers
    are returned as they are (they were validated when made) unless secrets
    registered since need redacting from them (see the module's docstring).
    """
    if _FAITHFUL.get():
        stamp, redacting = _VERBATIM, False
    else:  # with no secret known, clean as it is: marked so, not walked
        stamp, redacting = redaction_stamp(), _SECRETS.live
    try:
        return _walk(value, stamp, redacting)
    except _Bad as bad:
        if _key is not None:
            bad.parts.append(f".{_key}" if isinstance(_key, str) else f"[{_key}]")
        raise JsonValueError(path + "".join(reversed(bad.parts)), bad.problem) from None
    except RecursionError:
        try:
            cycle = _find_cycle(value, set(), path)
        except RecursionError:  # deep but acyclic: the search recursed too far too
            cycle = None
        if cycle is not None:
            raise JsonValueError(cycle, "value contains itself (a cycle)") from None
        raise JsonValueError(path, "value is nested too deeply") from None


def freeze_faithful(value: Any, *, path: str = "value") -> Any:
    """:func:`freeze` without redaction: the same validation, the value kept as it is.

    Redaction belongs where text *enters* the log (``Session.append`` and the
    records it is given). Whatever is derived from the log (a rebuilt request,
    its encoding, a digest) must be a pure function of the log, whatever
    secrets the reading process happens to have registered; otherwise an
    auditor whose key occurs in a log would rebuild different bytes.
    """
    token = _FAITHFUL.set(True)
    try:
        return freeze(value, path=path)
    finally:
        _FAITHFUL.reset(token)


def freeze_decoded(value: Any) -> Any:
    """Freeze a value that is lossless JSON already, converting only its plain
    ``dict`` and ``list`` containers (frozen ones inside are kept as they are).

    For what came straight from the canonical decoder (orjson only produces
    lossless JSON: no NaN or infinities, no lone surrogates, string keys) and
    for objects assembled from frozen log data. Never call this on anything else.
    """
    t = type(value)
    if t is dict:
        frozen = _dict_new(FrozenDict)
        _dict_update(frozen, value)  # scalars are copied as they are ...
        for k, v in value.items():  # ... only containers are converted
            tv = type(v)
            if tv is dict or tv is list:
                _dict_set(frozen, k, freeze_decoded(v))
        return frozen
    if t is list:
        out = _list_new(FrozenList)  # unstamped: a copy of logged data (_VERBATIM)
        _list_init(
            out, [freeze_decoded(v) if type(v) is dict or type(v) is list else v for v in value]
        )
        return out
    return value


# What freeze_decoded calls per container (every message of a load), bound once.
_dict_new, _dict_update, _dict_set = dict.__new__, dict.update, dict.__setitem__
_list_new, _list_init = list.__new__, list.__init__


freeze_trusted = freeze_decoded
"""The name to use when the value was built from frozen data rather than decoded."""


def concat_frozen(*parts: Iterable[Any]) -> FrozenList:
    """A FrozenList of already-frozen values, without walking them again.

    For hot paths that assemble a request from frozen pieces (the header's
    prefix, projected messages): each part is copied once, at C speed. Every
    item must already be frozen.
    """
    out = list.__new__(FrozenList)
    for part in parts:
        list.extend(out, part)
    return out


def freeze_dict(value: Any, *, path: str = "value") -> FrozenDict:
    """:func:`freeze` for a value that must be a JSON object."""
    frozen = freeze(value, path=path)
    if not isinstance(frozen, FrozenDict):
        raise JsonValueError(path, "must be a JSON object")
    return frozen


def freeze_list(value: Any, *, path: str = "value") -> FrozenList:
    """:func:`freeze` for a value that must be a JSON array."""
    frozen = freeze(value, path=path)
    if not isinstance(frozen, FrozenList):
        raise JsonValueError(path, "must be a JSON array")
    return frozen


def thaw(value: Any) -> Any:
    """Return a plain mutable deep copy (dicts and lists) of a frozen JSON value."""
    if isinstance(value, dict):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, list):
        return [thaw(v) for v in value]
    return value
