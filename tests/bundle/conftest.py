"""Fixtures for bundle tests: a real OCI registry on loopback (``oci_registry``) and an isolated cache."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.bundle.oci_registry import oci_registry, oci_registry_with_login  # noqa: F401  (fixtures)


@pytest.fixture
def oci_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private cache directory, so pulls in one test never see another's cache entries."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("RECONCILER_OCI_CACHE_DIR", str(cache))
    yield cache
