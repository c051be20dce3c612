"""The repository fixtures every suite may use (registered by tests/conftest.py), built by ``tests.support.repo``.

A suite whose tests need more around a repository (an install to undo afterwards, more bundles in it) has a
fixture of its own that takes one of these and adds that.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.repo import GitOpsRepo, example_copy


@pytest.fixture
def gitops(tmp_path: Path) -> GitOpsRepo:
    """The example repository, its Operator approved and without its lockfile, committed to git at
    ``tmp_path/gitops`` (a git server serving ``tmp_path`` serves it as ``/gitops/.git``)."""
    return GitOpsRepo(tmp_path / "gitops")


@pytest.fixture
def example_repo(tmp_path: Path) -> Path:
    """The example repository, its Operator approved and without its lockfile, as a plain directory (not a git
    repository) at ``tmp_path/repo``."""
    return example_copy(tmp_path / "repo", lock=False)
