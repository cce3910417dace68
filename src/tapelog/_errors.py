"""The one exception tree of tapelog.

Every error a user can see is a subclass of :class:`TapelogError` and carries a
whole sentence that names what went wrong and, where there is one, the fix::

    TapelogError
    ├── FrozenError (also TypeError)        mutation of logged / derived data
    ├── JsonValueError (also ValueError)    data that is not lossless JSON
    ├── LogError                            an event or log that breaks the format
    │   ├── EventError                      bad envelope or payload
    │   ├── SurfaceError                    illegal surface operation
    │   ├── HeaderError                     bad request header or delta
    │   └── ReentrantAppendError            append while an append is published
    ├── ForkError                           fork at an illegal boundary
    ├── StoreError                          storage problems
    │   ├── SessionNotFoundError
    │   ├── SessionExistsError
    │   ├── SessionLockedError              a second writer on one session
    │   ├── FormatVersionError              another format version on disk
    │   ├── CorruptLogError                 damaged stored data (names the line)
    │   ├── UndigestedEventsError           resume refused: events no digest covers
    │   ├── UnstoredEventsError             a write failed (says what is stored when shown)
    │   └── InvalidSessionIdError
    ├── ReconstructionError                 a request the log cannot explain
    │   └── ClientMismatchError             a client that does not speak the logged config
    ├── ProviderError                       a provider answered with an error
    │   └── ContextOverflowError            the request is too long for the model
    ├── ToolError                           a tool could not run
    ├── OutputError (also ValueError)       an output type structured output cannot use
    ├── McpError                            an MCP server that cannot be configured or started
    ├── ProxyError                          a request the proxy answers itself (with a status)
    └── ExportError                         an export the extra or the receiver cannot make

Each is defined here, whichever package raises it, and re-exported by that
package's public ``__init__`` (``tapelog.mcp.McpError``, ...): one module holds
every error a ``catch`` can see (tests/test_layout.py checks). So does the one
internal control-flow exception, :class:`Aborted`, which is no ``TapelogError``.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = [
    "Aborted",
    "ClientMismatchError",
    "ContextOverflowError",
    "CorruptLogError",
    "EventError",
    "ExportError",
    "ForkError",
    "FormatVersionError",
    "FrozenError",
    "HeaderError",
    "InvalidSessionIdError",
    "JsonValueError",
    "LogError",
    "McpError",
    "OutputError",
    "ProviderError",
    "ProxyError",
    "ReconstructionError",
    "ReentrantAppendError",
    "SessionExistsError",
    "SessionLockedError",
    "SessionNotFoundError",
    "StoreError",
    "SurfaceError",
    "TapelogError",
    "ToolError",
    "UndigestedEventsError",
    "UnstoredEventsError",
]


class TapelogError(Exception):
    """Base class of every error tapelog raises on purpose."""


class FrozenError(TapelogError, TypeError):
    """Logged events and derived messages are immutable; copy with ``thaw()``."""


class JsonValueError(TapelogError, ValueError):
    """A value is not lossless JSON (NaN, a non-string key, a cycle, ...)."""

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}")


class LogError(TapelogError):
    """An event or a sequence of events breaks the log format; ``seq`` says
    where, when known."""

    def __init__(self, message: str, *, seq: int | None = None) -> None:
        self.seq = seq
        super().__init__(message)


class EventError(LogError):
    """An event's envelope or payload is invalid."""


class SurfaceError(LogError):
    """A surface operation (append / replace) is illegal."""


class HeaderError(LogError):
    """A request header or header delta is invalid."""


class ReentrantAppendError(LogError):
    """An append was attempted while another append was being published."""


class ForkError(TapelogError):
    """A fork was requested at a boundary that cannot be forked."""


class StoreError(TapelogError):
    """Something went wrong reading or writing stored sessions."""


class UnstoredEventsError(StoreError):
    """A write of a session writer failed; its message says what is stored when it is shown.

    The writer keeps the events and a later flush (the closing one) may store
    them after all: a message fixed at raise time ("none of the 7 events was
    stored") would be false by the time a command prints it on exit, so the
    message is worked out again each time (``describe``).
    """

    def __init__(self, describe: Callable[[], str]) -> None:
        self._describe = describe
        super().__init__(describe())

    def __str__(self) -> str:
        return self._describe()


class SessionNotFoundError(StoreError):
    """No stored session has the given id."""


class SessionExistsError(StoreError):
    """A session with that id is already stored."""


class SessionLockedError(StoreError):
    """Another writer holds the session."""


class FormatVersionError(StoreError):
    """The stored session uses a format version this code does not read."""


class CorruptLogError(StoreError):
    """Stored data is damaged; ``line`` (1-based) says where, when known."""

    def __init__(self, message: str, *, line: int | None = None) -> None:
        self.line = line
        super().__init__(message)


class UndigestedEventsError(StoreError):
    """A resume was refused: whole events follow the session's last digest, which
    no tapelog write leaves (``accept_undigested=True`` resumes anyway)."""


class InvalidSessionIdError(StoreError, ValueError):
    """A session id that cannot name a stored session safely."""


class ReconstructionError(TapelogError):
    """A request about to be sent differs from what the log rebuilds."""


class ClientMismatchError(ReconstructionError):
    """The provider client would send something other than what the logged config
    says: another provider, or a wire format or wire option the config does not
    name. The request is refused before anything is sent."""


class ProviderError(TapelogError):
    """A provider answered with an error (never carries the API key).

    ``retry_after`` is the delay in seconds the server asked for before a retry
    (its ``retry-after-ms`` or ``Retry-After`` header), ``None`` when it named none.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        body: str | None = None,
        request_id: str | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
    ) -> None:
        self.status = status
        self.body = body
        self.request_id = request_id
        self.retryable = retryable
        self.retry_after = retry_after
        super().__init__(message)


class ContextOverflowError(ProviderError):
    """The provider rejected the request because it exceeds the context window."""


class ToolError(TapelogError):
    """A tool could not be defined or run."""


class OutputError(TapelogError, ValueError):
    """A structured-output type, schema or mode cannot be used with this agent."""


class McpError(TapelogError):
    """An MCP server could not be configured or started (the sentence says which and why)."""


class ProxyError(TapelogError):
    """A request the proxy answers itself, with ``status`` and this message in
    the client API's error shape (never forwarded, nothing logged for it unless
    it says so)."""

    def __init__(self, message: str, *, status: int = 400, kind: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind


class ExportError(TapelogError):
    """An export that could not be made: the extra is missing, or the receiver failed."""


class Aborted(Exception):
    """Internal: an abort handle fired (``AbortHandle.abort``, ``Agent.abort``).

    Not a :class:`TapelogError`: it never reaches a user. The HTTP edge raises it
    while it waits and ends the stream quietly; the agent loop raises it between
    and after steps and ends the turn with ``{"kind": "aborted"}``. One class
    serves both, so an ``except Aborted`` can never catch one and miss the other.
    """
