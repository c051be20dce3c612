"""olm.lock: the lockfile a resolution implies, and the checks that keep a committed one honest (``pins``); the
``Lockfile`` type itself is ``model/lock.py``."""

from __future__ import annotations

from reconciler.lock.pins import (
    check_lock_entries, check_locked, held_bundles, lock_pins, plan_lock, repin_moved_tags, write_lock,
)

__all__ = ["check_lock_entries", "check_locked", "held_bundles", "lock_pins", "plan_lock", "repin_moved_tags",
           "write_lock"]
