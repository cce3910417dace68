"""A session's list row: the sessions page's fold of its events, extended as it grows.

The sessions page must not replay every log to draw its table, so each row is
a small fold over the events that matter for it: turns and how the last one
ended, the loop requests and their prompt and cached tokens, the provider and
model the headers name. The store folds it incrementally
(:meth:`tapelog.store.SessionStore.summaries`): a log that grew is folded
from where the last fold stopped, and only the types in :data:`FOLDED_TYPES`
are read (``assistant/chunk`` lines, the bulk of a log, never are).

Which steps count as requests is not decided here: each step's events go
through the request walk's own :class:`~tapelog.request.StepFold` (the rule
:func:`tapelog.request.walk_requests`, and so the cache audit, applies), and
a step's tokens are the usage of its ``assistant/message``. A step still open
counts as far as its events say so far; when it ends, what it added is
settled. The index's audit (the real :func:`cache_report`) adds the cache
efficiency, which needs the simulation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, ClassVar, Final

from tapelog.llm._api import usage_prompt_tokens
from tapelog.log._api import Event
from tapelog.request._api import HEADER_TYPES, StepFold
from tapelog.store._api import Folded

__all__ = ["FOLDED_TYPES", "Summary", "open_turn"]

FOLDED_TYPES: Final = frozenset(
    {"turn/start", "turn/end", "step/start", "step/end", "assistant/message", *HEADER_TYPES}
)
_MODELS_KEPT: Final = 8
_STORED: Final = ("id", "created", "parent", "events", "last_time", "error")


def open_turn(events: Sequence[Event]) -> bool:
    """:attr:`Summary.open_turn` of a log, read from its end: whether its last
    ``turn/start`` or ``turn/end`` is a ``turn/start`` (the last of the two
    decides the fold's value), without folding every event."""
    for seq in range(len(events) - 1, -1, -1):
        kind = events[seq].type
        if kind in ("turn/start", "turn/end"):
            return kind == "turn/start"
    return False


@dataclass(slots=True, kw_only=True)
class Summary:
    """One session's row (see the module docstring). Its fields are plain JSON
    values, persisted as they are (``to_json`` / ``from_json``), except the
    step still open, which is not: a row read back with one is folded again."""

    types: ClassVar[frozenset[str]] = FOLDED_TYPES

    id: str
    created: int | None = None
    parent: str | None = None
    events: int = 0
    """Events stored (the seq the next one has)."""
    last_time: int | None = None
    turns: int = 0
    open_turn: bool = False
    last_reason: str | None = None
    requests: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    provider: str | None = None
    model: str | None = None
    models: list[str] = field(default_factory=list)
    """Every ``provider / model`` a header named, in order (at most 8)."""
    error: str | None = None
    """Why the session could not be read (it is listed, marked damaged)."""
    headed: bool = False
    """Whether a request header is logged (an open step counts only then)."""
    step: StepFold | None = field(default=None, compare=False, repr=False)
    counted: tuple[int, int, int] = (0, 0, 0)
    """What the open step adds to (requests, prompt_tokens, cached_tokens)."""

    # --- folding ---------------------------------------------------------------

    def feed(self, kind: str, seq: int, data: Mapping[str, Any]) -> StepFold | None:
        """Fold one event (other types change nothing); the step this event
        ended, if it ended one (to see whether it was sent)."""
        ended: StepFold | None = None
        step = self.step
        if step is not None:
            self._count(None)
            if not step.feed_data(kind, data) or step.closed:
                ended, self.step = step, None
            self._count(step)
        if kind == "turn/start":
            self.turns += 1
            self.open_turn = True
        elif kind == "turn/end":
            self.open_turn = False
            reason = data.get("reason")
            self.last_reason = str(reason.get("kind")) if isinstance(reason, Mapping) else None
        elif kind == "step/start":
            self.step = StepFold(seq, None, headed=self.headed, fold_headers=False)
            self._count(self.step)
        elif kind in HEADER_TYPES:
            self.headed = True
            header = data.get("header")
            self._config(
                header.get("config") if isinstance(header, Mapping) else data.get("config")
            )
        return ended

    def _count(self, step: StepFold | None) -> None:
        """Take back what the open step added, then add what ``step`` adds now."""
        if self.counted != (0, 0, 0):
            requests, prompt, cached = self.counted
            self.requests -= requests
            self.prompt_tokens -= prompt
            self.cached_tokens -= cached
            self.counted = (0, 0, 0)
        if step is None or not step.sent:
            return
        usage = step.usage
        prompt = usage_prompt_tokens(usage) if usage else 0
        cached = int(usage.get("cache_read", 0)) if usage else 0
        self.counted = (1, prompt, cached)
        self.requests += 1
        self.prompt_tokens += prompt
        self.cached_tokens += cached
        if step.closed:
            self.counted = (0, 0, 0)  # settled

    def _config(self, config: Any) -> None:
        if not isinstance(config, Mapping):
            return
        provider, model = config.get("provider"), config.get("model")
        self.provider = str(provider) if provider is not None else None
        self.model = str(model) if model is not None else None
        name = f"{self.provider} / {self.model}"
        if name not in self.models and len(self.models) < _MODELS_KEPT:
            self.models.append(name)

    def stored(self, folded: Folded[Summary]) -> Summary:
        """This row with what the store says of the session (``folded``, whose fold it is)."""
        for name in _STORED:
            setattr(self, name, getattr(folded, name))
        return self

    # --- derived ---------------------------------------------------------------

    @property
    def hit_ratio(self) -> float | None:
        """cached / prompt tokens (``None`` without prompt tokens)."""
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else None

    def to_json(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "step"}
        out["models"] = list(self.models)
        out["counted"] = list(self.counted)
        out["open_step"] = self.step is not None
        return out

    def copy(self) -> Summary:
        """An independent copy (to extend while the original stays as it was)."""
        step = None if self.step is None else self.step.copy()
        return replace(self, models=list(self.models), step=step)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Summary:
        """A persisted row back; ``ValueError`` if ``obj`` is not one (or was
        saved inside a step, which only a fold from the start can continue)."""
        names = {f.name for f in fields(cls)} - {"step"} | {"open_step"}
        if not isinstance(obj, Mapping) or set(obj) != names:
            raise ValueError("not a summary row")
        if obj["open_step"] is not False:
            raise ValueError("a summary row saved inside a step")
        for name, check in _CHECKS.items():
            if not check(obj[name]):
                raise ValueError(f"a summary row has a bad {name!r}")
        values: dict[str, Any] = {k: v for k, v in obj.items() if k != "open_step"}
        values["models"] = list(values["models"])
        values["counted"] = tuple(values["counted"])
        return cls(**values)


def _int(value: Any) -> bool:
    return type(value) is int


def _opt(kind: type) -> Any:
    return lambda value: value is None or type(value) is kind


_CHECKS: Final = {
    "id": lambda v: type(v) is str,
    "created": _opt(int),
    "parent": _opt(str),
    "events": _int,
    "last_time": _opt(int),
    "turns": _int,
    "open_turn": lambda v: type(v) is bool,
    "last_reason": _opt(str),
    "requests": _int,
    "prompt_tokens": _int,
    "cached_tokens": _int,
    "provider": _opt(str),
    "model": _opt(str),
    "models": lambda v: isinstance(v, list) and all(type(m) is str for m in v),
    "error": _opt(str),
    "headed": lambda v: type(v) is bool,
    "counted": lambda v: isinstance(v, list) and len(v) == 3 and all(type(n) is int for n in v),
}
