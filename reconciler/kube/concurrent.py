"""Running cluster requests concurrently: one pool of ``WORKERS`` threads for the process, shared by every stage
that reads or writes many objects at once (approval's CRD reads, the engine's plan and writes, health checks).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from reconciler.kube.client import WORKERS


_POOL: ThreadPoolExecutor | None = None


_POOL_LOCK = threading.Lock()


_POOL_PREFIX = "reconciler-requests"


def concurrently(fn: Callable[[Any], Any], items: list[Any]) -> list[Any]:
    """``fn`` over ``items`` with up to ``WORKERS`` requests in flight; results in the order of ``items``.

    The worker threads live as long as the process (a loop reconciles every few minutes; starting eight
    threads several times per run costs more than the run's own work on a busy machine). A call made from a
    worker runs in that worker, so nesting cannot wait for itself.
    """
    global _POOL
    if len(items) <= 1 or threading.current_thread().name.startswith(_POOL_PREFIX):
        return [fn(i) for i in items]
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix=_POOL_PREFIX)
    return list(_POOL.map(fn, items))
