"""When one API request is tried again, and after how long.

A transient answer (429 Too Many Requests from API Priority and Fairness,
502/503/504 from a restarting apiserver or a load balancer, 500 with a
Retry-After) or a dropped connection should not abort a whole plan or apply.
Each request is retried a bounded number of times with exponential backoff
and full jitter, honouring Retry-After (capped), inside one run.

A request that may have reached the server is retried only if repeating it
is harmless: reads, PUT, DELETE and server-side apply (an apply PATCH of the
same object is idempotent). A POST create is not, unless the caller treats
409 AlreadyExists as success; a 429 is always safe, since the server rejects
it before doing anything, and so is a connection that was never made.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})
APPLY_PATCH = "application/apply-patch+yaml"
RETRY_STATUSES = frozenset({429, 502, 503, 504})


@dataclass(frozen=True)
class RetryPolicy:
    """Bounds for one request: attempts in all, backoff base and cap, and the longest Retry-After honoured."""

    attempts: int = 5
    base: float = 0.25
    cap: float = 8.0
    max_retry_after: float = 30.0

    def delay(self, attempt: int, retry_after: float | None, rng: random.Random | None = None) -> float:
        """Seconds to wait before attempt ``attempt + 1`` (attempt counts from 1)."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_retry_after)
        return (rng or random).uniform(0, min(self.cap, self.base * 2 ** (attempt - 1)))


DEFAULT_POLICY = RetryPolicy()


def idempotent(method: str, content_type: str) -> bool:
    """Whether repeating the request after it may have been applied leaves the same result."""
    method = method.upper()
    return method in IDEMPOTENT_METHODS or (method == "PATCH" and content_type.split(";")[0].strip() == APPLY_PATCH)


def retryable_status(status: int, retry_after: float | None, *, repeatable: bool) -> bool:
    """Whether an HTTP answer is transient and the request may be sent again."""
    if status == 429:
        return True  # rejected before it was processed, whatever the method
    if not repeatable:
        return False
    return status in RETRY_STATUSES or (500 <= status <= 599 and retry_after is not None)


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delay-seconds form; an HTTP date is ignored as kubectl does)."""
    if not value:
        return None
    try:
        return max(float(value.strip()), 0.0)
    except ValueError:
        return None
