"""Which HTTP requests the proxy answers at all: its clients are programs, not web pages.

The proxy has no authentication: whoever reaches its port writes turns into
sessions and spends the upstream credentials it holds for keyless upstreams.
A web page in the user's browser can reach a loopback port too, two ways:

* by a DNS name rebound to 127.0.0.1: the request's ``Host`` is the page's
  name, so a ``Host`` that is not a loopback name is refused (421), as
  ``tapelog serve`` refuses it (the same reading, ``tapelog._loopback``);
* by a cross-site request that needs no preflight (a ``text/plain`` or form
  body): a browser always sends ``Origin`` with it, and SDKs never do, so a
  request with an ``Origin`` is refused (403) unless ``--allow-origin`` names
  that origin, and a body not declared ``application/json`` is refused (415).
  A page can only send ``application/json`` cross-site after a preflight,
  which the proxy answers only for the allowed origins.

Every refusal happens before the body is read: nothing is logged or sent.

A body nested deeper than :data:`MAX_BODY_DEPTH` levels is refused too (a
400, after it is decoded): the log cannot hold a value nested much deeper
(its JSON encoder stops at 254 levels, and an event wraps a request's values
in a few levels of its own), and the recursive checks before it would
otherwise fail with an internal error instead of a sentence.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from tapelog._errors import ProxyError
from tapelog._loopback import is_loopback_host_header
from tapelog.log._api import encode_trusted

__all__ = ["MAX_BODY_DEPTH", "RequestGuard", "nested_too_deeply"]

_SHOWN: Final = 80

MAX_BODY_DEPTH: Final = 128
"""The deepest request body the proxy takes: levels of objects and arrays, the
body itself the first (JSON Schemas and tool inputs stay far below it)."""

_ENCODER_DEPTH: Final = 254
"""The deepest value the log's JSON encoder writes (orjson's limit)."""


def nested_too_deeply(body: Any) -> bool:
    """Whether a decoded body nests more than :data:`MAX_BODY_DEPTH` levels.

    Measured by the log's own encoder, in C: the body wrapped in as many
    arrays as leave it exactly :data:`MAX_BODY_DEPTH` levels under the
    encoder's limit encodes if and only if the body is no deeper than that.
    It costs 0.4 ms for the 3 MB body of 10,000 messages in
    bench/bench_proxy.py (its parse: 23 ms), a quarter or less of what a walk
    over the body in Python costs.
    """
    wrapped = body
    for _ in range(_ENCODER_DEPTH - MAX_BODY_DEPTH):
        wrapped = [wrapped]
    try:
        encode_trusted(wrapped)
    except TypeError as exc:  # orjson.JSONEncodeError
        return "Recursion limit" in str(exc)  # not another value it cannot write
    return False


def _shown(value: str) -> str:
    return repr(value if len(value) <= _SHOWN else value[: _SHOWN - 1] + "…")


def normal_origin(origin: str) -> str:
    """An origin as compared: lowercase, without a trailing slash."""
    return origin.strip().rstrip("/").lower()


class RequestGuard:
    """The Host, Origin and content-type rules (see the module docstring).

    ``check_host`` is off when the proxy was started with ``--allow-remote``
    (its clients then name it by a non-loopback name); ``allowed_origins``
    are the web origins that may use it (``--allow-origin``).
    """

    def __init__(self, *, check_host: bool = True, allowed_origins: Iterable[str] = ()) -> None:
        self.check_host = check_host
        self.allowed_origins = tuple(sorted({normal_origin(o) for o in allowed_origins}))

    def host_problem(self, headers: Mapping[str, str]) -> ProxyError | None:
        """A 421 for a ``Host`` that does not name the loopback, else None."""
        host = headers.get("host", "")
        if not self.check_host or is_loopback_host_header(host):
            return None
        return ProxyError(
            f"the proxy answers requests to loopback names only (127.0.0.1, localhost, [::1]), "
            f"not to Host {_shown(host)}; start it with --allow-remote to serve other names",
            status=421,
            kind="invalid_request_error",
        )

    def check(self, headers: Mapping[str, str]) -> None:
        """Raise the :class:`ProxyError` that refuses a request, if any."""
        problem = self.host_problem(headers)
        if problem is not None:
            raise problem
        origin = headers.get("origin")
        if origin is not None and normal_origin(origin) not in self.allowed_origins:
            raise ProxyError(
                f"the proxy refuses requests from web pages (Origin {_shown(origin)}); "
                "start it with --allow-origin ORIGIN to let that page use it",
                status=403,
                kind="permission_error",
            )
        declared = headers.get("content-type")
        media = (declared or "").partition(";")[0].strip().lower()
        if media != "application/json":
            what = _shown(declared) if declared is not None else "no content type"
            raise ProxyError(
                f"the request body must be sent as application/json, not {what}",
                status=415,
                kind="invalid_request_error",
            )
