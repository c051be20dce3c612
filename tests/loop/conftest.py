"""Fixtures for the loop's tests: a git server on loopback serving the example repository (``gitops``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.loop.gitserver import GitHttpServer
from tests.support.repo import GitOpsRepo

USER, TOKEN = "reconciler", "s3cret-token"


@pytest.fixture
def git_server(gitops: GitOpsRepo) -> Iterator[GitHttpServer]:
    """Smart HTTP with Basic auth, serving the example repository (``gitops``) at ``<url>/gitops/.git``."""
    server = GitHttpServer(gitops.path.parent, username=USER, password=TOKEN).start()
    yield server
    server.stop()


@pytest.fixture
def k8s(control_plane):
    from reconciler.kube.client import Kube

    return Kube(control_plane.admin_client())


def uninstall(kube) -> None:
    """Remove everything the default instance installed, through the real pipeline, from a throwaway empty
    repository: the Operators are handed over to it first, as docs/ownership.md describes."""
    import tempfile

    from reconciler import pipeline
    from reconciler.repo.identity import detect

    with tempfile.TemporaryDirectory() as d:
        Path(d, "reconciler.yaml").write_text("allowEmpty: true\n")
        hand_over(kube, detect(Path(d).resolve()))
        pipeline.reconcile(d, kube, dry_run=False)


def hand_over(kube, repository: str, instance: str = "default") -> list[str]:
    """``kubectl annotate operators.reconciler.dev NAME reconciler.dev/repository=REPOSITORY --overwrite``
    for every Operator of ``instance``; returns their names."""
    from reconciler.cluster.status import objects as status_objects
    from reconciler.model.kube import ANNOTATION_REPOSITORY

    info = status_objects.resource(kube)
    names = sorted(status_objects.read_all(kube, instance)) if info else []
    for name in names:
        kube.request("PATCH", info.path("", name), body={"metadata": {"annotations": {
            ANNOTATION_REPOSITORY: repository}}}, content_type="application/merge-patch+json")
    return names
