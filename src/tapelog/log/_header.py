"""The request header (EpochHeader) and its pure codecs.

The header is the non-history part of a request: the call config, the rendered
system prompt, the tool schemas in send order and the request-only prefix
messages. It is logged as a full snapshot (``request/header``) or as a delta
(``request/header-delta``) against the folded header before it:

* ``system`` -- a common-prefix/suffix trim: ``keep_start`` items from the
  start and ``keep_end`` from the end of the old prompt survive and the new
  ones go between them. A text prompt's items are its lines (``insert``); a
  prompt that is a list of blocks (a client's Anthropic ``system``, kept with
  every field of every block) has blocks as items (``blocks``);
* ``tools`` -- ``remove`` (names), ``change`` (whole schemas, same name, same
  place) and ``add`` (schemas merged into name order: each goes before the first
  tool whose name sorts after it);
* ``config`` and ``prefix`` -- replaced whole.

A delta is only an optimisation: the writer checks that it round-trips and
writes a ``fallback`` snapshot when it does not (a pure tool reorder is the
classic case). Canonical form: empty is the same as absent.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from tapelog._errors import HeaderError, JsonValueError
from tapelog.log._canonical import encode
from tapelog.log._events import Event
from tapelog.log._freeze import FrozenDict, FrozenList, freeze_dict, freeze_list

__all__ = [
    "EpochHeader",
    "LlmCallConfig",
    "apply_header_delta",
    "canonical_header",
    "diff_header",
    "fold_header_event",
    "fold_request_header",
    "header_from_json",
    "system_lines",
]

MODEL_HEADERS: Final = ("anthropic-beta", "anthropic-version", "openai-beta")
"""The request headers a config may log: they change what the model reads
(a beta's tool format, an API version), and none of them is a credential."""

_SCALARS: Final = (
    ("max_tokens", int),
    ("temperature", (int, float)),
    ("top_p", (int, float)),
    ("seed", int),
    ("reasoning_effort", str),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class LlmCallConfig:
    """Everything about a model call that is not messages, system or tools.

    All of it is logged. ``extras`` holds provider-specific body fields (for
    example ``{"thinking": {"type": "enabled"}}`` for DeepSeek); they are sent
    as given, after the standard fields. ``wire`` holds choices of the wire
    format that change what the model sees without being body fields of their
    own (for example ``{"reasoning_send_back": "never"}``); the wire format is
    chosen from the config alone, so they must be logged too (docs/providers.md).
    """

    provider: str
    model: str
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    stop: tuple[str, ...] = ()
    reasoning_effort: str | None = None
    extras: Mapping[str, Any] = field(default_factory=FrozenDict)
    wire: Mapping[str, Any] = field(default_factory=FrozenDict)
    headers: Mapping[str, str] = field(default_factory=FrozenDict)
    """Request headers that change what the model reads (``anthropic-beta``,
    ``anthropic-version``, ``openai-beta``), lowercased names in the client's
    order; sent with the request. Never credentials: only :data:`MODEL_HEADERS`."""

    def __post_init__(self) -> None:
        if not isinstance(self.provider, str) or not self.provider:
            raise HeaderError("config.provider must be a non-empty string")
        if not isinstance(self.model, str) or not self.model:
            raise HeaderError("config.model must be a non-empty string")
        object.__setattr__(self, "stop", tuple(self.stop))
        object.__setattr__(self, "extras", freeze_dict(self.extras, path="config.extras"))
        object.__setattr__(self, "wire", freeze_dict(self.wire, path="config.wire"))
        headers = freeze_dict(self.headers, path="config.headers")
        for name, value in headers.items():
            if name not in MODEL_HEADERS:
                raise HeaderError(
                    f"config.headers may hold only {', '.join(MODEL_HEADERS)} (lowercased), "
                    f"not {name!r}"
                )
            if not isinstance(value, str):
                raise HeaderError(f"config.headers.{name} must be a string")
        object.__setattr__(self, "headers", headers)

    def to_json(self) -> FrozenDict:
        """Canonical JSON form: unset fields are absent."""
        out: dict[str, Any] = {"provider": self.provider, "model": self.model}
        for name, _ in _SCALARS:
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if self.stop:
            out["stop"] = list(self.stop)
        if self.extras:
            out["extras"] = self.extras
        if self.wire:
            out["wire"] = self.wire
        if self.headers:
            out["headers"] = self.headers
        return freeze_dict(out)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> LlmCallConfig:
        if not isinstance(obj, Mapping):
            raise HeaderError("header.config must be an object")
        known = {"provider", "model", "stop", "extras", "wire", "headers"}
        known.update(n for n, _ in _SCALARS)
        unknown = [k for k in obj if k not in known]
        if unknown:
            raise HeaderError(f"header.config has an unknown field {unknown[0]!r}")
        kwargs: dict[str, Any] = {}
        for name, kind in _SCALARS:
            value = obj.get(name)
            if value is not None:
                if isinstance(value, bool) or not isinstance(value, kind):
                    raise HeaderError(f"header.config.{name} has the wrong type")
                kwargs[name] = value
        stop = obj.get("stop", ())
        if not isinstance(stop, (list, tuple)) or not all(isinstance(s, str) for s in stop):
            raise HeaderError("header.config.stop must be a list of strings")
        for name in ("extras", "wire", "headers"):
            if not isinstance(obj.get(name, {}), Mapping):
                raise HeaderError(f"header.config.{name} must be an object")
        return cls(
            provider=obj.get("provider"),  # type: ignore[arg-type]
            model=obj.get("model"),  # type: ignore[arg-type]
            stop=tuple(stop),
            extras=obj.get("extras", {}),
            wire=obj.get("wire", {}),
            headers=obj.get("headers", {}),
            **kwargs,
        )

    def replace(self, **changes: Any) -> LlmCallConfig:
        """A copy with some fields changed (validated like a new config)."""
        return dataclasses.replace(self, **changes)


def _check_tools(tools: Sequence[Any]) -> FrozenList:
    frozen = freeze_list(list(tools), path="header.tools")
    seen: set[str] = set()
    for i, tool in enumerate(frozen):
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str) or not tool["name"]:
            raise HeaderError(f"header.tools[{i}] must be an object with a non-empty 'name'")
        if tool["name"] in seen:
            raise HeaderError(f"header.tools has two tools named {tool['name']!r}")
        seen.add(tool["name"])
    return frozen


def _check_system(system: Any) -> str | FrozenList | None:
    """A system prompt in canonical form (empty is absent)."""
    if system is None or isinstance(system, str):
        return system or None
    if not isinstance(system, (list, tuple)):
        raise HeaderError("header.system must be a string or a list of blocks")
    frozen = freeze_list(list(system), path="header.system")
    for i, block in enumerate(frozen):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise HeaderError(f"header.system[{i}] must be a block (an object with a string type)")
    return frozen or None


def system_lines(system: str | Sequence[Mapping[str, Any]] | None) -> list[str]:
    """What the audit compares a system prompt by: a text's lines, or one line
    per block (its canonical JSON), so a changed block (its text, its
    ``cache_control``...) is named as the line that changed."""
    if not system:
        return []
    if isinstance(system, str):
        return system.split("\n")
    return [encode(block).decode("utf-8") for block in system]


def _check_prefix(prefix: Sequence[Any]) -> FrozenList:
    frozen = freeze_list(list(prefix), path="header.prefix")
    for i, message in enumerate(frozen):
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            raise HeaderError(f"header.prefix[{i}] must be a message with role user or assistant")
        if not isinstance(message.get("content"), list):
            raise HeaderError(f"header.prefix[{i}].content must be a list of blocks")
    return frozen


@dataclass(frozen=True, slots=True, kw_only=True)
class EpochHeader:
    """The non-history part of a request, in canonical form (empty == absent)."""

    config: LlmCallConfig
    system: str | Sequence[Mapping[str, Any]] | None = None
    """One text, or (as a client sent it to Anthropic) a list of blocks, each
    with every field in its order (``cache_control`` included)."""
    tools: Sequence[Mapping[str, Any]] = ()
    prefix: Sequence[Mapping[str, Any]] = ()
    _canonical: bytes | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.config, LlmCallConfig):
            raise HeaderError("header.config must be an LlmCallConfig")
        object.__setattr__(self, "system", _check_system(self.system))
        object.__setattr__(self, "tools", _check_tools(self.tools))
        object.__setattr__(self, "prefix", _check_prefix(self.prefix))

    def to_json(self) -> FrozenDict:
        """Canonical JSON form: keys config, system, tools, prefix; empty ones absent."""
        out: dict[str, Any] = {"config": self.config.to_json()}
        if self.system:
            out["system"] = self.system
        if self.tools:
            out["tools"] = self.tools
        if self.prefix:
            out["prefix"] = self.prefix
        return freeze_dict(out)

    def canonical_bytes(self) -> bytes:
        """``encode(self.to_json())``, computed once (a header is immutable):
        what comparing, hashing and the wires' header memo key on."""
        cached = self._canonical
        if cached is None:
            cached = encode(self.to_json())
            object.__setattr__(self, "_canonical", cached)
        return cached

    def tool_names(self) -> list[str]:
        return [t["name"] for t in self.tools]

    def __eq__(self, other: object) -> bool:
        """Equal when the canonical forms are; a header also equals its JSON form
        (so ``apply_header_delta(a, d) == canonical_header(b)`` reads naturally)."""
        if isinstance(other, Mapping):
            try:
                other = header_from_json(other)
            except (HeaderError, JsonValueError):
                return False
        if not isinstance(other, EpochHeader):
            return NotImplemented
        return self is other or self.canonical_bytes() == other.canonical_bytes()

    def __hash__(self) -> int:
        return hash(self.canonical_bytes())


def header_from_json(obj: Any) -> EpochHeader:
    """Parse a header's JSON form (as logged in ``request/header``)."""
    if not isinstance(obj, Mapping):
        raise HeaderError("header must be an object")
    unknown = [k for k in obj if k not in ("config", "system", "tools", "prefix")]
    if unknown:
        raise HeaderError(f"header has an unknown field {unknown[0]!r}")
    if "config" not in obj:
        raise HeaderError("header.config is required")
    system = obj.get("system")
    tools = obj.get("tools", ())
    prefix = obj.get("prefix", ())
    if not isinstance(tools, (list, tuple)):
        raise HeaderError("header.tools must be a list")
    if not isinstance(prefix, (list, tuple)):
        raise HeaderError("header.prefix must be a list")
    return EpochHeader(
        config=LlmCallConfig.from_json(obj["config"]), system=system, tools=tools, prefix=prefix
    )


def as_header(header: EpochHeader | Mapping[str, Any]) -> EpochHeader:
    """An EpochHeader from itself or its JSON form."""
    return header if isinstance(header, EpochHeader) else header_from_json(header)


def canonical_header(header: EpochHeader | Mapping[str, Any]) -> FrozenDict:
    """The canonical JSON form of a header (an EpochHeader or its JSON)."""
    return as_header(header).to_json()


def _lines(text: str | None) -> list[str]:
    return text.split("\n") if text else []


def _items(system: Any) -> list[Any]:
    """A system prompt's delta items: a text's lines, a block list's blocks."""
    if isinstance(system, str):
        return _lines(system)
    return list(system or ())


def _system_delta(old: Any, new: Any) -> dict[str, Any] | None:
    blocks = new is not None and not isinstance(new, str)
    items = _items(new)
    # Blocks are compared by their bytes: their key order is the client's.
    a, b = (
        ([encode(x) for x in _items(old)], [encode(x) for x in items])
        if blocks
        else (_items(old), items)
    )
    if blocks != (old is not None and not isinstance(old, str)):
        a = []  # a text prompt became blocks (or back): the new one whole
    elif a == b:
        return None
    start = 0
    limit = min(len(a), len(b))
    while start < limit and a[start] == b[start]:
        start += 1
    end = 0
    while end < limit - start and a[len(a) - 1 - end] == b[len(b) - 1 - end]:
        end += 1
    return {"keep_start": start, "keep_end": end, _kind(blocks): items[start : len(b) - end]}


def _kind(blocks: bool) -> str:
    return "blocks" if blocks else "insert"


def _tools_delta(
    old: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]]
) -> dict[str, Any] | None:
    if encode(list(old)) == encode(list(new)):
        return None
    old_by_name = {t["name"]: t for t in old}
    new_names = {t["name"] for t in new}
    delta: dict[str, Any] = {}
    add = [t for t in new if t["name"] not in old_by_name]
    remove = [t["name"] for t in old if t["name"] not in new_names]
    change = [
        t for t in new if t["name"] in old_by_name and encode(t) != encode(old_by_name[t["name"]])
    ]
    if add:
        delta["add"] = add
    if remove:
        delta["remove"] = remove
    if change:
        delta["change"] = change
    return delta


def diff_header(
    prev: EpochHeader | Mapping[str, Any], next: EpochHeader | Mapping[str, Any]
) -> FrozenDict | None:
    """The delta from ``prev`` to ``next``, or ``None`` when they are equal.

    The delta may not round-trip (a pure tool reorder cannot be expressed);
    writers check ``apply_header_delta(prev, delta) == next`` and fall back to
    a snapshot otherwise. Headers may be given as EpochHeader or JSON.
    """
    prev, next = as_header(prev), as_header(next)
    if prev is next or prev.canonical_bytes() == next.canonical_bytes():
        return None
    delta: dict[str, Any] = {}
    system = _system_delta(prev.system, next.system)
    if system is not None:
        delta["system"] = system
    tools = _tools_delta(prev.tools, next.tools)
    if tools is not None:
        delta["tools"] = tools
    if encode(prev.config.to_json()) != encode(next.config.to_json()):
        delta["config"] = next.config.to_json()
    if encode(list(prev.prefix)) != encode(list(next.prefix)):
        delta["prefix"] = list(next.prefix)
    return freeze_dict(delta) if delta else None


def _apply_system(old: Any, delta: Any) -> Any:
    if not isinstance(delta, Mapping):
        raise HeaderError("delta.system must be an object")
    blocks = "blocks" in delta
    keep_start, keep_end, insert = (
        delta.get("keep_start"),
        delta.get("keep_end"),
        delta.get(_kind(blocks)),
    )
    item = dict if blocks else str
    if (
        type(keep_start) is not int
        or type(keep_end) is not int
        or keep_start < 0
        or keep_end < 0
        or not isinstance(insert, list)
        or not all(isinstance(line, item) for line in insert)
        or ("blocks" in delta and "insert" in delta)
    ):
        raise HeaderError(
            "delta.system needs integer keep_start, keep_end >= 0 and a list of insert "
            "lines or of blocks"
        )
    lines = _items(old) if blocks == (old is not None and not isinstance(old, str)) else []
    unit = "block" if blocks else "line"
    if keep_start + keep_end > len(lines):
        raise HeaderError(
            f"delta.system keeps {keep_start}+{keep_end} {unit}s of a {len(lines)}-{unit} prompt"
        )
    new = lines[:keep_start] + list(insert) + lines[len(lines) - keep_end :]
    if blocks:
        return new or None
    return "\n".join(new) or None


def _apply_tools(old: Sequence[Mapping[str, Any]], delta: Any) -> list[Any]:
    if not isinstance(delta, Mapping):
        raise HeaderError("delta.tools must be an object")
    unknown = [k for k in delta if k not in ("add", "remove", "change")]
    if unknown:
        raise HeaderError(f"delta.tools has an unknown field {unknown[0]!r}")
    for key in ("add", "remove", "change"):
        if key in delta and not isinstance(delta[key], list):
            raise HeaderError(f"delta.tools.{key} must be a list")
    tools = list(old)
    names = [t["name"] for t in tools]
    for name in delta.get("remove", ()):
        if name not in names:
            raise HeaderError(f"delta.tools removes {name!r}, which the header does not have")
        i = names.index(name)
        del tools[i], names[i]
    for tool in delta.get("change", ()):
        name = tool.get("name") if isinstance(tool, Mapping) else None
        if name not in names:
            raise HeaderError(f"delta.tools changes {name!r}, which the header does not have")
        tools[names.index(name)] = tool
    for tool in delta.get("add", ()):
        name = tool.get("name") if isinstance(tool, Mapping) else None
        if not isinstance(name, str):
            raise HeaderError("delta.tools.add entries must be tool schemas with a name")
        if name in names:
            raise HeaderError(f"delta.tools adds {name!r}, which the header already has")
        at = next((i for i, n in enumerate(names) if n > name), len(names))
        tools.insert(at, tool)
        names.insert(at, name)
    return tools


def apply_header_delta(
    prev: EpochHeader | Mapping[str, Any], delta: Mapping[str, Any]
) -> EpochHeader:
    """Apply a ``request/header-delta`` payload to ``prev`` (pure)."""
    prev = as_header(prev)
    if not isinstance(delta, Mapping):
        raise HeaderError("a header delta must be an object")
    unknown = [k for k in delta if k not in ("system", "tools", "config", "prefix")]
    if unknown:
        raise HeaderError(f"delta has an unknown field {unknown[0]!r}")
    system = _apply_system(prev.system, delta["system"]) if "system" in delta else prev.system
    tools = _apply_tools(prev.tools, delta["tools"]) if "tools" in delta else prev.tools
    config = LlmCallConfig.from_json(delta["config"]) if "config" in delta else prev.config
    prefix = delta.get("prefix", prev.prefix)
    if not isinstance(prefix, (list, tuple)):
        raise HeaderError("delta.prefix must be a list")
    return EpochHeader(config=config, system=system, tools=tools, prefix=prefix)


def fold_header_event(prev: EpochHeader | None, event: Event) -> EpochHeader | None:
    """One step of :func:`fold_request_header` (other event types pass through)."""
    if event.type == "request/header":
        return header_from_json(event.data["header"])
    if event.type == "request/header-delta":
        if prev is None:
            raise HeaderError(
                "request/header-delta before any request/header snapshot; "
                "log a full request/header first"
            )
        return apply_header_delta(prev, event.data)
    return prev


def fold_request_header(events: Iterable[Event]) -> EpochHeader | None:
    """The header in force after ``events`` (``None`` if no header was logged)."""
    header: EpochHeader | None = None
    for event in events:
        try:
            header = fold_header_event(header, event)
        except HeaderError as exc:
            raise HeaderError(f"seq {event.seq}: {exc}") from None
    return header
