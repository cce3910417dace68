"""What the cache audit carries from one request to the next, and what of it a checkpoint keeps.

The audit (``_cache_report``) walks a log's requests in send order with four
pieces of state: the :class:`~tapelog.audit._segments.SegmentRenderer` (the
previous prompt and per-node pieces), each rule's emulated provider cache
(:class:`~tapelog.cache.PrefixStore`), each rule's prefixes sent so far
(:class:`Seen`) and the previous request (what the next one compares with).
Only the two key sets cannot be had again from the log without walking it
once more: the renderer's pieces and the previous request are functions of the
previous request alone, which the walk yields anyway. So :class:`AuditState`,
what resumes an audit after its first ``requests`` requests, holds the two key
sets and the previous request's rendered chain (its segment keys and token
counts, where the wire renders no groups: not Anthropic); the resumed audit
takes the rest from request ``requests`` as the walk yields it (rendering it
again when no chain is kept: docs/format.md, "Cache audit checkpoint").
"""

from __future__ import annotations

import base64
import itertools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, get_args

from tapelog.audit._segments import SegmentRenderer
from tapelog.cache._api import PrefixStore, Prompt, Rule

__all__ = ["AuditState", "KeyTable", "Seen"]


class Seen:
    """Every prompt prefix sent so far (prefix-closed), for the shared-prefix column."""

    def __init__(self, keys: tuple[str, ...] = ()) -> None:
        self._keys: set[str] = set(keys)

    def shared(self, prompt: Prompt) -> int:
        """Tokens of the longest prefix an earlier prompt had; records this prompt."""
        segments = prompt.segments
        hit = len(segments) - 1
        while hit >= 0 and segments[hit].key not in self._keys:
            hit -= 1
        for i in range(hit + 1, len(segments)):
            self._keys.add(segments[i].key)
        return prompt.ends[hit] if hit >= 0 else 0

    def keys(self) -> list[str]:
        """The keys recorded, sorted (a set has no order worth keeping)."""
        return sorted(self._keys)


@dataclass(frozen=True, slots=True)
class AuditState:
    """The audit's state once its first :attr:`requests` requests are audited."""

    requests: int
    stores: Mapping[str, tuple[str, ...]]
    """Each rule's emulated cache: the prefix keys it holds (``PrefixStore.keys``)."""
    seen: Mapping[str, tuple[str, ...]]
    """Each rule's prefixes sent so far (:class:`Seen`)."""
    chain: Mapping[str, Any] | None = None
    """The last request's rendered chain (``SegmentRenderer.chain``): spares
    rendering that request again; ``None``: it is rendered again."""

    @classmethod
    def of(
        cls,
        requests: int,
        stores: Mapping[Rule, PrefixStore],
        seen: Mapping[Rule, Seen],
        renderer: SegmentRenderer,
    ) -> AuditState:
        """A copy of the live state (the audit goes on changing it)."""
        return cls(
            requests,
            {rule: tuple(store.keys()) for rule, store in stores.items()},
            {rule: tuple(s.keys()) for rule, s in seen.items()},
            renderer.chain(),
        )

    def restore(self) -> tuple[dict[Rule, PrefixStore], dict[Rule, Seen]]:
        """Live state to go on from (fresh objects: the state stays as it is)."""
        stores: dict[Rule, PrefixStore] = {}
        for rule, keys in self.stores.items():
            store = stores[_rule(rule)] = PrefixStore()
            store.hold(keys)
        return stores, {_rule(rule): Seen(keys) for rule, keys in self.seen.items()}

    def to_json(self) -> dict[str, Any]:
        """The state with every prefix key written once, in a shared key table
        (docs/format.md, "Cache audit checkpoint"): the cache, the prefixes
        seen and the last chain hold mostly the same keys."""
        chain = self.chain
        chained = () if chain is None else chain["keys"]
        table = KeyTable(*self.stores.values(), *self.seen.values(), chained)
        stores = {rule: table.runs(table.indexes(keys)) for rule, keys in self.stores.items()}
        seen = {rule: table.runs(sorted(table.indexes(keys))) for rule, keys in self.seen.items()}
        if chain is not None:
            chain = {**chain, "keys": table.runs(table.indexes(chained))}
        return {
            "requests": self.requests,
            "keys": table.text(),
            "stores": stores,
            "seen": seen,
            "chain": chain,
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> AuditState:
        """The state :meth:`to_json` gave; ``ValueError`` (or a ``KeyError`` /
        ``TypeError``) on anything else: a checkpoint is untrusted input."""
        requests = obj["requests"]
        if not isinstance(requests, int) or isinstance(requests, bool) or requests < 0:
            raise ValueError("requests")
        keys = KeyTable.read(obj["keys"])
        chain = obj["chain"]
        if chain is not None:
            if not isinstance(chain, dict):
                raise ValueError("chain")
            chain = {**chain, "keys": list(_keyed(keys, chain["keys"]))}
        return cls(requests, _key_sets(keys, obj["stores"]), _key_sets(keys, obj["seen"]), chain)


_DIGEST = 32
"""A prefix key is the hex of a SHA-256 digest (``chain_segments``): 32 bytes."""


class KeyTable:
    """Prefix keys, each kept once, named by their position.

    In a checkpoint the table is one base64 string of the keys' digests, 32
    bytes each (43 characters a key instead of 67 for a quoted hex string),
    and a list of keys is its positions as runs: ``[[first, count], ...]``
    (a simulated cache holds its keys in table order, so its list is one run).
    """

    def __init__(self, *key_lists: Iterable[str]) -> None:
        """The table of every key of ``key_lists``, in the order first met."""
        self._keys = list(dict.fromkeys(itertools.chain.from_iterable(key_lists)))
        self._index = {key: i for i, key in enumerate(self._keys)}

    def indexes(self, keys: Iterable[str]) -> list[int]:
        """The position of each key (each one of the table's)."""
        return list(map(self._index.__getitem__, keys))

    @staticmethod
    def runs(indexes: Iterable[int]) -> list[list[int]]:
        """Positions as ``[first, count]`` runs, in order."""
        out: list[list[int]] = []
        first = previous = -2
        for i in indexes:
            if i != previous + 1:
                if previous >= 0:
                    out.append([first, previous - first + 1])
                first = i
            previous = i
        if previous >= 0:
            out.append([first, previous - first + 1])
        return out

    def text(self) -> str:
        """The table: the digests in position order, as one base64 string."""
        raw = b"".join(map(bytes.fromhex, self._keys))
        return base64.b64encode(raw).decode("ascii")

    @staticmethod
    def read(text: Any) -> list[str]:
        """The keys of a table :meth:`text` wrote (``ValueError`` on anything else)."""
        if not isinstance(text, str):
            raise ValueError("key table")
        raw = base64.b64decode(text, validate=True)
        if len(raw) % _DIGEST:
            raise ValueError("key table")
        return [raw[i : i + _DIGEST].hex() for i in range(0, len(raw), _DIGEST)]


_RULES: frozenset[str] = frozenset(get_args(Rule))


def _rule(name: str) -> Rule:
    if name not in _RULES:
        raise ValueError(f"rule {name!r}")
    return name  # type: ignore[return-value]  # checked against every Rule


def _keyed(table: list[str], runs: Any) -> Iterator[str]:
    """The keys that ``[first, count]`` runs name in ``table``."""
    if not isinstance(runs, list):
        raise ValueError("runs")
    for first, count in runs:
        if not (type(first) is int and type(count) is int and count > 0 and first >= 0):
            raise ValueError("run")
        if first + count > len(table):
            raise ValueError("run past the key table")
        yield from table[first : first + count]


def _key_sets(table: list[str], obj: Any) -> dict[str, tuple[str, ...]]:
    if not isinstance(obj, dict):
        raise ValueError("key sets")
    return {_rule(rule): tuple(_keyed(table, runs)) for rule, runs in obj.items()}
