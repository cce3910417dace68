"""A session's list row, folded from its events in one pass and extended as it grows.

The sessions page must not replay every log to draw its table, so each row is
a small fold over the events that matter for it: turns and how the last one
ended, the loop requests and their prompt and cached tokens, the provider and
model the header names. The fold never looks back, so a log that grew is
folded from where the last fold stopped (``events`` says how far that is).

Requests and tokens follow the rule of :func:`tapelog.request.walk_requests`
(which the cache audit uses): a ``step/start`` is a request unless its
``step/end`` says ``"sent": false``; its tokens are the usage of the step's
``assistant/message``. The index's audit (the real :func:`cache_report`) checks
that both agree and adds the cache efficiency, which needs the simulation.

Scanning bytes is fast because most lines are skipped unread: a log line is
canonical JSON whose envelope starts ``{"seq":N,"time":T,"type":"...``, so its
type is found without decoding it, and only the few types the fold needs are
decoded (``assistant/chunk`` lines, the bulk of a log, never are).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Final

from tapelog.llm._api import usage_prompt_tokens
from tapelog.log import decode
from tapelog.log._api import SESSION_FORMAT_VERSION

__all__ = ["FOLDED_TYPES", "Summary", "envelope", "line_type"]

FOLDED_TYPES: Final = frozenset(
    {
        "turn/start",
        "turn/end",
        "step/start",
        "step/end",
        "assistant/message",
        "request/header",
        "request/header-delta",
    }
)
_TYPE_AT: Final = b',"type":"'
_ENVELOPE: Final = re.compile(rb'\{"seq":(\d+),"time":(-?\d+),')
_MODELS_KEPT: Final = 8


def line_type(line: bytes) -> str | None:
    """The event type of a canonical log line, read without decoding it."""
    start = line.find(_TYPE_AT, 0, 80)
    if start < 0:
        return None
    start += len(_TYPE_AT)
    end = line.find(b'"', start, start + 40)
    return line[start:end].decode("ascii", "replace") if end > 0 else None


def envelope(line: bytes) -> tuple[int, int] | None:
    """The (seq, time) a canonical log line starts with, read without decoding it."""
    match = _ENVELOPE.match(line)
    return None if match is None else (int(match.group(1)), int(match.group(2)))


@dataclass(slots=True, kw_only=True)
class Summary:
    """One session's row (see the module docstring); plain JSON values only, so it
    is persisted as it is (``to_json`` / ``from_json``)."""

    id: str
    created: int | None = None
    parent: str | None = None
    events: int = 0
    """Events folded so far (the seq the next one has)."""
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
    # the open step: whether it still counts, and what its message added
    in_step: bool = False
    step_prompt: int = 0
    step_cached: int = 0

    # --- folding ---------------------------------------------------------------

    def header(self, line: bytes) -> None:
        """Fold the JSONL header line (or a PostgreSQL store's header bytes)."""
        try:
            obj = decode(line, path="header")
        except Exception as exc:
            self.error = f"line 1: {exc}"
            return
        if not isinstance(obj, dict) or obj.get("format_version") != SESSION_FORMAT_VERSION:
            version = obj.get("format_version") if isinstance(obj, dict) else None
            self.error = f"line 1: not a tapelog header of format version 0 (got {version!r})"
            return
        if obj.get("id") != self.id:
            self.error = f"line 1: the header names session {obj.get('id')!r}"
            return
        created, parent = obj.get("created"), obj.get("parent")
        self.created = created if type(created) is int else None
        self.parent = parent if isinstance(parent, str) else None

    def lines(self, lines: Iterable[bytes], *, counted: bool = True) -> None:
        """Fold log lines in order. ``counted``: they are every line from
        ``events`` on (so they advance it); else only the folded types were given
        and the caller sets ``events`` and ``last_time`` itself."""
        last = None
        for line in lines:
            last = line
            if counted:
                self.events += 1
            kind = line_type(line)
            if kind in FOLDED_TYPES:
                try:
                    self.feed(kind, decode(line, path="event")["data"])
                except Exception as exc:
                    found = envelope(line)
                    where = f"seq {found[0]}" if found else "an event"
                    self.error = f"{where}: {exc}"
                    return
        found = envelope(last) if counted and last is not None else None
        if found is not None:
            self.last_time = found[1]

    def feed(self, kind: str, data: Mapping[str, Any]) -> None:
        """Fold one event (its type and data); other types change nothing."""
        if kind == "turn/start":
            self.in_step = False
            self.turns += 1
            self.open_turn = True
        elif kind == "turn/end":
            self.in_step = False
            self.open_turn = False
            reason = data.get("reason")
            self.last_reason = str(reason.get("kind")) if isinstance(reason, Mapping) else None
        elif kind == "step/start":
            self.requests += 1
            self.in_step = True
            self.step_prompt = self.step_cached = 0
        elif kind == "step/end":
            if self.in_step and data.get("sent") is False:
                self.requests -= 1
                self.prompt_tokens -= self.step_prompt
                self.cached_tokens -= self.step_cached
            self.in_step = False
        elif kind == "assistant/message":
            if self.in_step:
                usage = data.get("usage")
                prompt = usage_prompt_tokens(usage) if usage else 0
                cached = int(usage.get("cache_read", 0)) if usage else 0
                self.prompt_tokens += prompt - self.step_prompt
                self.cached_tokens += cached - self.step_cached
                self.step_prompt, self.step_cached = prompt, cached
        elif kind == "request/header":
            header = data.get("header")
            if isinstance(header, Mapping):
                self._config(header.get("config"))
        elif kind == "request/header-delta":
            self._config(data.get("config"))

    def _config(self, config: Any) -> None:
        if not isinstance(config, Mapping):
            return
        provider, model = config.get("provider"), config.get("model")
        self.provider = str(provider) if provider is not None else None
        self.model = str(model) if model is not None else None
        name = f"{self.provider} / {self.model}"
        if name not in self.models and len(self.models) < _MODELS_KEPT:
            self.models.append(name)

    # --- derived ---------------------------------------------------------------

    @property
    def hit_ratio(self) -> float | None:
        """cached / prompt tokens (``None`` without prompt tokens)."""
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def copy(self) -> Summary:
        """An independent copy (to extend while the original stays as it was)."""
        return replace(self, models=list(self.models))

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Summary:
        """A persisted row back; ``ValueError`` if ``obj`` is not one."""
        if not isinstance(obj, Mapping) or set(obj) != set(cls.__dataclass_fields__):
            raise ValueError("not a summary row")
        for name, check in _CHECKS.items():
            if not check(obj[name]):
                raise ValueError(f"a summary row has a bad {name!r}")
        values: dict[str, Any] = {k: (list(v) if k == "models" else v) for k, v in obj.items()}
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
    "in_step": lambda v: type(v) is bool,
    "step_prompt": _int,
    "step_cached": _int,
}
