"""The session log: events, surface, projection, request header and canonical JSON."""

from tapelog.log._canonical import decode, encode
from tapelog.log._events import PACKED_TYPES
from tapelog.log._redact import forget_secrets, redact, register_secret

__all__ = [
    "PACKED_TYPES",
    "decode",
    "encode",
    "forget_secrets",
    "redact",
    "register_secret",
]
