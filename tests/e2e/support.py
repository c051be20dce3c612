"""Helpers for end-to-end tests: the CLI in this process, and what a run left on the cluster."""

from __future__ import annotations

import io
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from reconciler.cli.parser import main
from reconciler.kube.client import Kube
from tests.support.repo import GitOpsRepo
from tests.support.wait import wait_until


@dataclass
class Run:
    code: int
    out: str
    err: str

    def __iter__(self):  # noqa: ANN204 - code, out, err = cli(...) unpacks it
        return iter((self.code, self.out, self.err))


def reconcile(repo: GitOpsRepo | Path, kubeconfig: Path | None, *extra: str,
              capsys: pytest.CaptureFixture[str]) -> Run:
    path = repo.path if isinstance(repo, GitOpsRepo) else repo
    args = ["reconcile", str(path), *extra]
    if kubeconfig is not None:
        args += ["--kubeconfig", str(kubeconfig)]
    capsys.readouterr()
    out = io.StringIO()
    code = main(args, out=out)
    return Run(code, out.getvalue(), capsys.readouterr().err)


def cli(*args: str, capsys: pytest.CaptureFixture[str]) -> Run:
    """The CLI in this process: exit code, stdout, stderr (a Run, which also unpacks as the three)."""
    capsys.readouterr()
    out = io.StringIO()
    code = main(list(args), out=out)
    return Run(code, out.getvalue(), capsys.readouterr().err)


def approving_everything(root: Path) -> Path:
    """A new repository of directly referenced bundles whose every bundle is approved (AllowAll), for tests of
    what comes after approval; it may end up empty (allowEmpty)."""
    from tests.unit.helpers import write

    write(root, "reconciler.yaml", "allowEmpty: true\nprovisionerClassName: approve-everything\n")
    write(root, "classes/approve-everything.yaml", "apiVersion: rukpak.io/v1\nkind: ProvisionerClass\n"
          "metadata: {name: approve-everything}\nprovisioner: operators.coreos.com/operators\n"
          "parameters: {approval: AllowAll}\n")
    return root


def approve(repo: GitOpsRepo, *operators: str, capsys: pytest.CaptureFixture[str]) -> Run:
    """`reconciler approve`, then commit the record: the approval."""
    capsys.readouterr()
    out = io.StringIO()
    code = main(["approve", str(repo.path), *operators, "--offline"], out=out)
    run = Run(code, out.getvalue(), capsys.readouterr().err)
    if code == 0:
        repo.commit(f"Approve {', '.join(operators)}")
    return run


def get(kube: Kube, api_version: str, kind: str, name: str, namespace: str = "") -> dict | None:
    info = kube.resource(api_version, kind)
    return kube.get(info, namespace, name) if info else None


def managed(kube: Kube, operator: str) -> set[str]:
    """Every object labelled as belonging to ``operator``, across the kinds a bundle produces."""
    found = set()
    for api_version, kind in [("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
                              ("rbac.authorization.k8s.io/v1", "ClusterRole"),
                              ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
                              ("rbac.authorization.k8s.io/v1", "Role"),
                              ("rbac.authorization.k8s.io/v1", "RoleBinding"),
                              ("v1", "ServiceAccount"), ("apps/v1", "Deployment")]:
        info = kube.resource(api_version, kind)
        assert info is not None
        for item in kube.list(info, label_selector=f"reconciler.dev/operator={operator}"):
            meta = item["metadata"]
            found.add(f"{kind} {meta.get('namespace', '')}/{meta['name']}".replace(" /", " "))
    return found


class RecordingKube(Kube):
    """The real client, with each request's method, path and dry-run flag written down."""

    def __init__(self, api: Any) -> None:
        super().__init__(api)
        self.calls: list[tuple[str, str, bool]] = []

    def request(self, method: str, path: str, *, query=None, **kw):
        self.calls.append((method, path, any(k == "dryRun" for k, _ in (query or []))))
        return super().request(method, path, query=query, **kw)

    def verbs(self) -> Counter[str]:
        return Counter(m + (" dry-run" if dry else "") for m, _, dry in self.calls)


# The kinds a bundle, its installer or a run can write, and what identifies and configures each: a refused run
# must leave every one of them as it found it.
STATE_KINDS = [("v1", "Namespace"), ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
               ("apiregistration.k8s.io/v1", "APIService"),
               ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"),
               ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"),
               ("rbac.authorization.k8s.io/v1", "ClusterRole"), ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
               ("rbac.authorization.k8s.io/v1", "Role"), ("rbac.authorization.k8s.io/v1", "RoleBinding"),
               ("v1", "ServiceAccount"), ("v1", "Secret"), ("v1", "ConfigMap"), ("v1", "Service"),
               ("apps/v1", "Deployment"), ("scheduling.k8s.io/v1", "PriorityClass"),
               ("policy/v1", "PodDisruptionBudget"), ("reconciler.dev/v1alpha1", "Operator")]


def cluster_state(kube: Kube, *, except_operator: str = "") -> dict[str, dict]:
    """Every object of ``STATE_KINDS`` (all namespaces), by ``Kind namespace/name``, with what it holds
    (uid, labels, annotations, spec, data, rules, webhooks ...; not resourceVersion, managedFields or status).
    ``except_operator``'s status object is left out: a refusal is reported there."""
    state = {}
    namespaces = kube.resource("v1", "Namespace")
    assert namespaces is not None
    # A namespace being deleted is gone as far as a refusal is concerned, and its contents go with it.
    leaving = {n["metadata"]["name"] for n in kube.list(namespaces) if n["metadata"].get("deletionTimestamp")}
    for api_version, kind in STATE_KINDS:
        info = kube.resource(api_version, kind)
        if info is None:
            continue
        for item in kube.list(info):
            meta = item["metadata"]
            if kind == "Operator" and meta["name"] == except_operator:
                continue
            if meta["name"] in leaving and kind == "Namespace" or meta.get("namespace") in leaving:
                continue
            body = {k: v for k, v in item.items() if k not in ("status", "metadata")}
            body["metadata"] = {k: v for k, v in meta.items()
                                if k not in ("resourceVersion", "managedFields", "generation")}
            state[f"{kind} {meta.get('namespace', '')}/{meta['name']}".replace(" /", " ")] = body
    return state


def state_changes(before: dict[str, dict], after: dict[str, dict]) -> list[str]:
    """What differs between two ``cluster_state`` readings, one line per object."""
    return sorted([f"added {k}" for k in after.keys() - before.keys()]
                  + [f"removed {k}" for k in before.keys() - after.keys()]
                  + [f"changed {k}" for k in before.keys() & after.keys() if before[k] != after[k]])


def wait_unchanged(kube: Kube, before: dict[str, dict], *, except_operator: str = "", timeout: float = 60.0) -> None:
    """Wait until the cluster is as ``before`` (``cluster_state``) again, while namespaces a refused run removed
    finish terminating; the wait fails naming what still differs (``state_changes``)."""
    def changes() -> list[str]:
        return state_changes(before, cluster_state(kube, except_operator=except_operator))

    wait_until(lambda: not changes(), "the cluster to be as it was before the run", timeout=timeout, every=1.0,
               diagnose=lambda: "still different:\n" + "\n".join(changes()))
