"""The session log: events, surface, projection, request header and canonical JSON.

Users take the log's types (``Session``, ``LlmCallConfig``, ``Event``, ...) from
the root package ``tapelog``; this package's own public names are the canonical
JSON codec and the secret registry. What the layers above share of the log and
users do not (the trusted freezes, the folds, ``paused_gc``, ...) is in
:mod:`tapelog.log._api` (docs/architecture.md, "Public and internal names").
"""

from tapelog.log._canonical import decode, encode
from tapelog.log._events import PACKED_TYPES
from tapelog.log._redact import redact, register_secret, secret_scope

__all__ = [
    "PACKED_TYPES",
    "decode",
    "encode",
    "redact",
    "register_secret",
    "secret_scope",
]
