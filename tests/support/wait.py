"""The one bounded wait of the tests: poll until something is true, or fail saying what did not happen.

What a test waits for (a controller acting, a loop applying a commit, a
server starting) takes as long as a busy machine makes it take, so the
deadline is generous and never asserted on (timings belong in bench/). A wait
that runs out fails naming what it waited for, how long, the last value it
saw and, when the caller can tell more (a peer's log), that text.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

# a value or an error is cut to this in the failure: enough to see it, not a page of it
SHOWN = 2000


class WaitTimeout(AssertionError):
    """A bounded wait ran out; the message says for what, how long, and what was last seen."""


def _shown(text: str) -> str:
    return text if len(text) <= SHOWN else text[:SHOWN] + f"... ({len(text) - SHOWN} more characters)"


def wait_until(probe: Callable[[], T], what: str, *, timeout: float = 90.0, every: float = 0.1,
               ignoring: type[BaseException] | tuple[type[BaseException], ...] | Callable[[BaseException], bool] = (),
               diagnose: Callable[[], str] | None = None) -> T:
    """Call ``probe`` until it returns something true, and return that.

    An exception ``probe`` raises ends the wait, unless it is one of ``ignoring`` (exception types, or a
    predicate over the exception): then it counts as not yet. After ``timeout`` seconds the wait fails
    (``WaitTimeout``, an AssertionError) naming ``what``, the last value ``probe`` returned or the last
    error it raised, and ``diagnose()`` when given.
    """
    if isinstance(ignoring, (tuple, type)):
        types = ignoring

        def ignored(exc: BaseException) -> bool:
            return isinstance(exc, types)
    else:
        ignored = ignoring
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = probe()
        except Exception as exc:   # noqa: BLE001 - only those the caller names are waited through
            if not ignored(exc):
                raise
            last = f"error {type(exc).__name__}: {exc}"
        else:
            if value:
                return value
            last = repr(value)
        if time.monotonic() >= deadline:
            message = f"timed out after {timeout:g}s waiting for {what}; last seen: {_shown(last)}"
            if diagnose is not None:
                message += "\n" + diagnose()
            raise WaitTimeout(message)
        time.sleep(every)
