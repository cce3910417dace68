"""Runtime context (date, working directory, git state, OS, shell) that never breaks the cache.

A context source reports a few short values. The loop puts all of them into
one message of the session prefix, once per loop instance, so the system
prompt never carries them and never changes because of them. Before each
step's message snapshot (the ``pre_step`` point, where no tool call waits for
its result) the sources are read again; a *watched* value that differs from
what the model was last told becomes one ``context/message`` with just the
change (``source.kind`` ``runtime-context``, the changes as data). The prefix
stays as it was, so each request still extends the one before.

"What the model was last told" is read from the log, not kept aside: the
values in the prefix message, then every ``runtime-context`` message still on
the surface, in order. So a change is reported once, also when another agent
instance or an earlier process reported it. A resumed loop instance reuses the
prefix message its log already holds when the session-frozen values are
unchanged (so a resume costs no cache either) and reports the watched values
that changed meanwhile; when a frozen value changed (another working
directory, another OS) it writes a fresh one.

Values are untrusted text (a branch name can hold anything git allows):
control and bidirectional-override characters are removed, registered secrets
redacted and the length bounded before anything is compared or logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import platform
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final, Protocol, runtime_checkable

from tapelog._errors import TapelogError
from tapelog.agent._hooks import text_blocks
from tapelog.log import redact
from tapelog.log._api import Event, FrozenDict, FrozenList, Session, freeze

__all__ = ["RUNTIME_CONTEXT_KIND", "ContextSource", "ContextWatcher", "RuntimeContext"]

RUNTIME_CONTEXT_KIND: Final = "runtime-context"
"""``source.kind`` of the ``context/message`` that reports a change."""

HEADING: Final = (
    "Runtime context at the start of this session (changes are reported as they happen):"
)
"""First line of the prefix message; the log's readers find the message by it."""

CHANGED: Final = "Runtime context changed: "
MAX_VALUE: Final = 200
"""Characters a value keeps (after cleaning); longer ones end in ``…``."""
MAX_KEYS: Final = 64
"""Keys one source may report."""
READ_TIMEOUT: Final = 10.0
"""Seconds a source's ``read`` may take before the step fails."""

_NAME: Final = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}")
# C0 and C1 controls, DEL, line and paragraph separators and the bidirectional
# embedding/override/isolate characters (the class cli/_terminal.py removes).
_CONTROL: Final = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


@runtime_checkable
class ContextSource(Protocol):
    """What the loop needs of a context source (see the module docstring).

    ``read`` returns the values it knows now (short text; a key it leaves out
    is unknown this time, which is not reported as a change) and must not
    block the event loop (run blocking work in a thread or a subprocess). Keys
    are unique across the sources of one agent. Keys in ``watched`` are read
    before every step and reported when they change; the others are
    session-frozen: they are in the prefix only. An exception from ``read``
    fails the step, like one from a hook.
    """

    @property
    def name(self) -> str: ...

    @property
    def watched(self) -> Collection[str]: ...

    async def read(self) -> Mapping[str, str]: ...


def clean_value(value: str) -> str:
    """``value`` as it may reach a log: one line, no control characters, no
    registered secret, at most :data:`MAX_VALUE` characters."""
    text = _CONTROL.sub(lambda m: " " if m[0] in "\t\n\r" else "", value)
    # Redact before bounding: a cut secret would no longer be recognised.
    text = redact(text.strip())
    return text if len(text) <= MAX_VALUE else text[: MAX_VALUE - 1] + "…"


class RuntimeContext:
    """The built-in source: ``date``, ``cwd``, ``git_branch``, ``git_dirty``, ``os``, ``shell``.

    ``date`` (the local date of ``clock()``), ``git_branch`` and ``git_dirty``
    (``yes``/``no``, untracked files included) are watched; the rest is
    session-frozen. Outside a git work tree (or without git, or when git does
    not answer within ``git_timeout`` seconds) the git values are left out.
    Only ``SHELL``'s last path component is read from ``environ``: nothing
    else of the environment ever reaches a request.
    """

    name = "runtime"
    watched: Collection[str] = frozenset({"date", "git_branch", "git_dirty"})

    def __init__(
        self,
        *,
        cwd: str | os.PathLike[str] | None = None,
        clock: Callable[[], datetime] | None = None,
        environ: Mapping[str, str] | None = None,
        git: str | None = "git",
        git_timeout: float = 2.0,
    ) -> None:
        self.cwd = Path(cwd if cwd is not None else os.getcwd()).absolute()
        self._clock = clock or (lambda: datetime.now().astimezone())
        self._environ = environ if environ is not None else os.environ
        self._git = git
        self._git_timeout = git_timeout

    async def read(self) -> dict[str, str]:
        values = {"date": self._clock().date().isoformat(), "cwd": str(self.cwd)}
        values.update(await self._git_state())
        values["os"] = _os_name()
        shell = self._environ.get("SHELL", "").rstrip("/\\")
        if shell:
            values["shell"] = re.split(r"[/\\]", shell)[-1]
        return values

    async def _git_state(self) -> dict[str, str]:
        """``git_branch`` and ``git_dirty`` from one ``git status`` subprocess, or nothing."""
        if self._git is None:
            return {}
        try:
            proc = await asyncio.create_subprocess_exec(
                self._git,
                "--no-optional-locks",  # never take the index lock the user's git may need
                "status",
                "--porcelain=v2",
                "--branch",
                cwd=self.cwd,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL,
            )
        except OSError:  # no git on PATH, no such directory, or it cannot run
            return {}
        try:
            return await asyncio.wait_for(_read_status(proc), self._git_timeout)
        except (TimeoutError, ValueError):  # too slow, or a line over the reader's limit
            return {}
        finally:
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):  # it just exited
                    proc.kill()
                await proc.wait()


async def _read_status(proc: asyncio.subprocess.Process) -> dict[str, str]:
    """Branch and dirty state from ``git status --porcelain=v2 --branch``.

    Reads only up to the first entry: one is enough to know the tree is dirty,
    so a tree with a million changes costs no memory.
    """
    assert proc.stdout is not None
    branch: str | None = None
    dirty = False
    while line := await proc.stdout.readline():
        if not line.startswith(b"#"):
            dirty = True
            break
        if line.startswith(b"# branch.head "):
            branch = line[len(b"# branch.head ") :].decode("utf-8", "replace").rstrip("\n")
    if not dirty and await proc.wait() != 0:  # not a work tree
        return {}
    if branch is None:
        return {}
    return {"git_branch": branch, "git_dirty": "yes" if dirty else "no"}


def _os_name() -> str:
    system = platform.system() or "unknown"
    return {"Darwin": "macOS"}.get(system, system)


# --- the loop's side -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Reading:
    """One read of every source: cleaned values, and which source said each."""

    values: dict[str, str]
    owner: dict[str, str]  # key -> source name


class ContextWatcher:
    """The loop's runtime context: the prefix message and the change messages.

    One per loop instance. With no sources it does nothing and costs nothing.
    """

    def __init__(self, sources: Iterable[ContextSource]) -> None:
        self.sources = list(sources)
        names: set[str] = set()
        for source in self.sources:
            if not isinstance(source, ContextSource):
                raise TapelogError(
                    f"{source!r} is not a context source: it needs name, watched and async read()"
                )
            name = _checked_name(source.name, "a context source's name")
            if name in names:
                raise TapelogError(f"two context sources are named {name!r}; rename one")
            names.add(name)
        self._watched = {key for source in self.sources for key in source.watched}
        self._base: dict[str, str] | None = None  # the prefix message's values
        self._seqs: list[int] = []  # runtime-context messages seen, in surface order
        self._scanned: int | None = None  # events looked at so far

    async def seed(self, session: Session) -> FrozenList:
        """The prefix seed: the runtime context message (none without sources).

        Reuses the message the log's header prefix holds when every
        session-frozen value is the same, so a resumed instance sends the very
        same prefix bytes.
        """
        if not self.sources:
            return FrozenList()
        reading = await self._read()
        logged = _logged_message(session)
        if logged is not None and self._frozen(_values_of(logged)) == self._frozen(reading.values):
            message: FrozenDict = logged
        else:
            text = "\n".join([HEADING, *(f"{k}: {v}" for k, v in reading.values.items())])
            message = freeze({"role": "user", "content": text_blocks(text)}, path="prefix")
        self._base = _values_of(message)
        return FrozenList([message])

    async def report_changes(self, session: Session) -> Event | None:
        """Log one ``context/message`` with the watched values that changed, if any.

        Called before a step's message snapshot, so the message joins that
        step's request; no tool call is waiting for its result there.
        """
        if not self.sources or self._base is None:
            return None
        reading = await self._read()
        told = self._told(session)
        changes = [
            {"source": reading.owner[key], "key": key, "from": told.get(key), "to": value}
            for key, value in reading.values.items()
            if key in self._watched and told.get(key) != value
        ]
        if not changes:
            return None
        text = CHANGED + "; ".join(
            f"{c['key']} {c['from'] if c['from'] is not None else '(none)'} → {c['to']}"
            for c in changes
        )
        event = session.append(
            "context/message",
            {
                "content": text_blocks(text),
                "source": {"kind": RUNTIME_CONTEXT_KIND, "changes": changes},
            },
            surface_op="append",
        )
        return event  # the next _told() finds it in the log like any other report

    def _frozen(self, values: Mapping[str, str]) -> dict[str, str]:
        return {k: v for k, v in values.items() if k not in self._watched}

    async def _read(self) -> _Reading:
        # Every read ends before an error is raised: none is left running
        # (a git subprocess included) after the step failed.
        results = await asyncio.gather(
            *(_read_one(source) for source in self.sources), return_exceptions=True
        )
        values: dict[str, str] = {}
        owner: dict[str, str] = {}
        for source, result in zip(self.sources, results, strict=True):
            if isinstance(result, BaseException):
                raise result
            for key, value in result.items():
                if key in owner:
                    raise TapelogError(
                        f"context sources {owner[key]!r} and {source.name!r} both report "
                        f"{key!r}; keys must be unique across sources"
                    )
                values[key], owner[key] = value, source.name
        return _Reading(values=values, owner=owner)

    def _told(self, session: Session) -> dict[str, str]:
        """What the model was last told: the prefix values, then every
        runtime-context message on the surface (O(new events) per call)."""
        assert self._base is not None
        events = session.events
        if self._scanned is None:
            self._seqs = [s for s in session.surface if _is_report(session.event(s))]
        else:
            self._seqs.extend(e.seq for e in events[self._scanned :] if _is_report(e))
        self._scanned = len(events)
        told = dict(self._base)
        for seq in self._seqs:
            if session.on_surface(seq):  # a compaction may have shadowed it
                _apply(told, session.event(seq).data["source"].get("changes"))
        return told


async def _read_one(source: ContextSource) -> dict[str, str]:
    """One source's values, checked and cleaned."""
    try:
        values = await asyncio.wait_for(source.read(), READ_TIMEOUT)
    except TimeoutError:
        raise TapelogError(
            f"context source {source.name!r} did not answer within {READ_TIMEOUT:g} s"
        ) from None
    if not isinstance(values, Mapping):
        raise TapelogError(f"context source {source.name!r} must return a mapping of str to str")
    if len(values) > MAX_KEYS:
        raise TapelogError(f"context source {source.name!r} reported more than {MAX_KEYS} keys")
    out: dict[str, str] = {}
    for key, value in values.items():
        _checked_name(key, f"a key of context source {source.name!r}")
        if not isinstance(value, str):
            raise TapelogError(
                f"context source {source.name!r} returned {type(value).__name__} for {key!r}; "
                "values are text"
            )
        cleaned = clean_value(value)
        if cleaned:  # nothing left is the same as not known
            out[key] = cleaned
    return out


def _checked_name(name: Any, what: str) -> str:
    if not isinstance(name, str) or _NAME.fullmatch(name) is None:
        raise TapelogError(
            f"{what} must be 1-64 letters, digits, '_', '.' or '-' starting with a letter, "
            f"got {name!r}"
        )
    return name


def _message_text(message: Any) -> str | None:
    """The text of a one-text-block message, else ``None``."""
    content = message.get("content") if isinstance(message, Mapping) else None
    if (
        isinstance(content, Sequence)
        and len(content) == 1
        and isinstance(content[0], Mapping)
        and content[0].get("type") == "text"
        and isinstance(content[0].get("text"), str)
    ):
        text: str = content[0]["text"]
        return text
    return None


def _logged_message(session: Session) -> FrozenDict | None:
    """The runtime context message of the header prefix in force, if any."""
    header = session.header
    for message in header.prefix if header is not None else ():
        text = _message_text(message)
        if text is not None and text.split("\n", 1)[0] == HEADING:
            assert isinstance(message, FrozenDict)
            return message
    return None


def _values_of(message: Mapping[str, Any]) -> dict[str, str]:
    """The ``key: value`` lines of a prefix message (values are one line each)."""
    text = _message_text(message) or ""
    values: dict[str, str] = {}
    for line in text.split("\n")[1:]:
        key, sep, value = line.partition(": ")
        if sep and _NAME.fullmatch(key):
            values[key] = value
    return values


def _is_report(event: Event) -> bool:
    if event.type != "context/message":
        return False
    source = event.data.get("source")
    return isinstance(source, Mapping) and source.get("kind") == RUNTIME_CONTEXT_KIND


def _apply(told: dict[str, str], changes: Any) -> None:
    """Fold one report's changes into ``told`` (malformed entries are skipped:
    a hand-written log may hold anything the payload rules allow)."""
    if not isinstance(changes, Sequence):
        return
    for change in changes:
        if not isinstance(change, Mapping) or not isinstance(change.get("key"), str):
            continue
        to = change.get("to")
        if isinstance(to, str):
            told[change["key"]] = to
        elif to is None:
            told.pop(change["key"], None)
