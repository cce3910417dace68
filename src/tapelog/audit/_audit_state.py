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

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, get_args

from tapelog.audit._segments import SegmentRenderer
from tapelog.cache._api import PrefixStore, Prompt, Rule

__all__ = ["AuditState", "Seen"]


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
        return {
            "requests": self.requests,
            "stores": {rule: list(keys) for rule, keys in self.stores.items()},
            "seen": {rule: list(keys) for rule, keys in self.seen.items()},
            "chain": self.chain,
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> AuditState:
        """The state :meth:`to_json` gave; ``ValueError`` (or a ``KeyError`` /
        ``TypeError``) on anything else: a checkpoint is untrusted input."""
        requests = obj["requests"]
        if not isinstance(requests, int) or isinstance(requests, bool) or requests < 0:
            raise ValueError("requests")
        chain = obj["chain"]
        if chain is not None and not isinstance(chain, dict):
            raise ValueError("chain")
        return cls(requests, _key_sets(obj["stores"]), _key_sets(obj["seen"]), chain)


_RULES: frozenset[str] = frozenset(get_args(Rule))


def _rule(name: str) -> Rule:
    if name not in _RULES:
        raise ValueError(f"rule {name!r}")
    return name  # type: ignore[return-value]  # checked against every Rule


def _key_sets(obj: Any) -> dict[str, tuple[str, ...]]:
    if not isinstance(obj, dict):
        raise ValueError("key sets")
    out: dict[str, tuple[str, ...]] = {}
    for rule, keys in obj.items():
        if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
            raise ValueError("keys")
        out[_rule(rule)] = tuple(keys)
    return out
