"""Holding back the end of a streamed text that may begin a secret.

One implementation for every place that logs a model's stream as it comes:
the loop's provider clients (``tapelog run``, ``chat``) and the proxy's relay.
Each streamed piece is logged as its own chunk, so a secret split across two
frames would be in the log with neither chunk holding it whole, and
``freeze`` (which redacts each string) would see neither half as a secret.
"""

from __future__ import annotations

from typing import Any, Final

from tapelog.log import redact
from tapelog.log._api import REDACTED, FrozenDict, freeze, secret_prefix_length

__all__ = ["SecretGuard"]

_HELD_FIELDS: Final = {"text": "text", "reasoning": "text", "tool_call": "arguments"}
"""The chunk kinds whose pieces are joined into one text, and the field holding it."""


class SecretGuard:
    """Keeps a registered secret from being logged in pieces.

    Each streamed piece is logged as its own chunk, so a secret split across
    two frames would be in the log with neither chunk holding it whole. While
    the text of a block (text, reasoning, tool-call arguments) ends with what
    begins a secret, as it is or encoded (:func:`tapelog.log.secret_prefix_length`, which also
    looks at the end of what the block already emitted), that part of the
    piece is held back and put in front of the block's next piece, where the
    whole secret is redacted. Any other chunk (another block, usage, finish)
    first releases what is held, so chunks keep their order; :meth:`release`
    gives it back at the end of the stream. Chunks that end with no such text
    pass unchanged.
    """

    _CONTEXT: Final = 512
    """How much of what a block emitted is kept to match a secret's start against."""

    def __init__(self, *, active: bool) -> None:
        self._active = active  # off when no secret is registered: chunks pass as they are
        self._block: tuple[Any, Any] | None = None
        self._tail = ""  # held back, not yet emitted
        self._context = ""  # the end of what the block emitted

    def feed(self, chunk: FrozenDict) -> list[FrozenDict]:
        if not self._active:
            return [chunk]
        kind = chunk.get("kind")
        field = _HELD_FIELDS.get(kind) if isinstance(kind, str) else None
        block = (kind, chunk.get("index"))
        out: list[FrozenDict] = []
        if field is None or not isinstance(chunk.get(field), str):
            out.extend(self.release())
            self._block = None
            out.append(chunk)
            return out
        if block != self._block:
            out.extend(self.release())
            self._block, self._context = block, ""
        piece: str = chunk[field]
        text = self._joined(piece) if self._tail else piece
        held = min(secret_prefix_length(self._context + text), len(text))
        head = text[: len(text) - held]
        self._tail = text[len(text) - held :]
        self._context = (self._context + head)[-self._CONTEXT :]
        if text is piece and not held:
            out.append(chunk)
        elif head or chunk.get("id") or chunk.get("name"):
            out.append(freeze({**chunk, field: head}))
        return out

    def _joined(self, piece: str) -> str:
        """The held text and ``piece``, redacted as one text.

        The parser froze (and so redacted) ``piece`` on its own, so the rest
        of a secret may already be ``***`` (an escape cut in two: ``\\u003`` +
        ``7...`` leaves ``7...``, itself a form of the secret's rest). What
        comes before that first ``***`` and begins a secret, reaching back
        into the held text, is that secret's start: it goes too.
        """
        tail = self._tail
        text = redact(tail + piece)
        marker = text.find(REDACTED)
        if marker < 0:
            return text
        start = min(secret_prefix_length(self._context + text[:marker]), marker)
        if start and marker - start < len(tail):
            return text[: marker - start] + text[marker:]
        return text

    def release(self) -> list[FrozenDict]:
        """The held text as a chunk of its block (none when nothing is held)."""
        if not self._tail or self._block is None:
            return []
        kind, index = self._block
        piece: dict[str, Any] = {"kind": kind}
        if index is not None:
            piece["index"] = index
        piece[_HELD_FIELDS[str(kind)]] = self._tail
        self._context = (self._context + self._tail)[-self._CONTEXT :]
        self._tail = ""
        return [freeze(piece)]
