"""Every catalog test gets its own cache directory, so no test reads another's cached catalogs."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECONCILER_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))


from tests.bundle.oci_registry import oci_registry, referrers_registry  # noqa: E402,F401  (fixtures: catalog images need a registry)
