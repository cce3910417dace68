"""How long the loop waits before retrying a provider error.

Exponential backoff, spread by jitter so that many clients refused at once do
not come back at once, and never shorter than the delay the server asked for
(``ProviderError.retry_after``, read from its ``retry-after-ms`` or
``Retry-After`` header by :mod:`tapelog.llm`). A server that asks for more
than the policy is willing to wait is not retried at all: retrying earlier
than asked is refused again and spends another attempt, and sleeping for an
unbounded time a server chose would hang the caller. The loop logs the wait
it chose (``retry_in_ms``) and the server's request (``retry_after_ms``) in
the failed attempt's ``error`` chunk, so the log explains every pause.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, get_args

from tapelog._errors import ProviderError

__all__ = ["Jitter", "RetryPolicy"]

Jitter = Literal["equal", "full", "none"]

_MAX_DOUBLINGS = 64  # 2**64 times any base delay is past every max_delay


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """Retries for retryable provider errors (408, 409, 429, 5xx, connection
    and stream errors): at most ``max_attempts`` attempts in all.

    The wait after failed attempt ``n`` starts from the backoff
    ``min(max_delay, base_delay * 2 ** (n - 1))``, spread by ``jitter``:
    ``"equal"`` (the default) draws it uniformly between half the backoff and
    all of it, ``"full"`` between 0 and all of it, ``"none"`` keeps it as is.
    The wait is never shorter than the server's ``retry_after``; one longer
    than ``max_retry_after`` seconds is not waited for: the error is raised
    at once, saying so (:meth:`refused`). ``rng`` returns floats in ``[0,
    1)`` (default :func:`random.random`); pass your own for repeatable waits.
    """

    max_attempts: int = 4
    base_delay: float = 0.5
    max_delay: float = 8.0
    max_retry_after: float = 60.0
    jitter: Jitter = "equal"
    rng: Callable[[], float] = field(default=random.random, compare=False, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int):
            raise TypeError(f"RetryPolicy.max_attempts must be an int, not {self.max_attempts!r}")
        if self.max_attempts < 1:
            raise ValueError(
                f"RetryPolicy.max_attempts must be at least 1, not {self.max_attempts}"
            )
        for name in ("base_delay", "max_delay", "max_retry_after"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ValueError(f"RetryPolicy.{name} must be a finite number >= 0, not {value!r}")
        if self.jitter not in get_args(Jitter):
            raise ValueError(
                f"RetryPolicy.jitter must be 'equal', 'full' or 'none', not {self.jitter!r}"
            )

    def backoff(self, attempt: int) -> float:
        """The backoff after failed attempt ``attempt`` (1-based), before jitter."""
        doublings = min(max(attempt - 1, 0), _MAX_DOUBLINGS)
        return float(min(self.max_delay, self.base_delay * 2**doublings))

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after failed attempt ``attempt`` (1-based): the
        jittered backoff, or the server's ``retry_after`` when that is longer."""
        wait = self.backoff(attempt)
        if self.jitter == "full":
            wait *= self.rng()
        elif self.jitter == "equal":
            wait = wait / 2 + wait / 2 * self.rng()
        return max(wait, retry_after or 0.0)

    def refuses(self, error: ProviderError) -> bool:
        """Whether the server asked for a longer wait than ``max_retry_after``."""
        return error.retry_after is not None and error.retry_after > self.max_retry_after

    def refused(self, error: ProviderError) -> ProviderError:
        """The error to end the turn with when :meth:`refuses` (not retryable)."""
        return ProviderError(
            f"{error} It asked to wait {error.retry_after:g} s, longer than the retry policy "
            f"waits (RetryPolicy.max_retry_after, {self.max_retry_after:g} s), so the turn "
            "ends instead; run it again later, or raise max_retry_after.",
            status=error.status,
            body=error.body,
            request_id=error.request_id,
            retryable=False,
            retry_after=error.retry_after,
        )
