"""The one root under which the reconciler caches: built tools, bundles, images and loaded catalogs."""

from __future__ import annotations

import os


def root() -> str:
    """$RECONCILER_CACHE_DIR, else ``reconciler`` in the XDG cache home ($XDG_CACHE_HOME, else ~/.cache).

    A string, not a ``Path``: a catalog load that hits its cache does not otherwise import pathlib.
    """
    if explicit := os.environ.get("RECONCILER_CACHE_DIR"):
        return explicit
    if xdg := os.environ.get("XDG_CACHE_HOME"):
        return os.path.join(xdg, "reconciler")
    return os.path.join(os.path.expanduser("~"), ".cache", "reconciler")
