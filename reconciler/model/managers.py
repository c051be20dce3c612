"""Who else applies an object: the marks GitOps tools leave on what they manage.

A tool that applies an object keeps applying it: Argo CD's self-heal and
Flux's reconcile bring back what another deletes or changes, and ACM's
policies do the same from a hub. Taking such an object over (or deleting it
as a takeover retires OLM's bookkeeping) starts a fight the reconciler
cannot win, so an object that one of them manages is refused, naming the
tool and the way to let go of it.

The marks are those each tool documents and writes: Flux's
``kustomize.toolkit.fluxcd.io/name`` and ``helm.toolkit.fluxcd.io/name``
labels, Argo CD's ``argocd.argoproj.io/tracking-id`` annotation (or, with
its label tracking, ``app.kubernetes.io/instance`` beside an entry of its
field manager), ACM's hosting annotations and policy labels; and, for any of
them, the field managers their controllers write under (managedFields).
"""

from __future__ import annotations

from typing import Any

Manifest = dict[str, Any]

# field manager -> (tool, how to let go of the object without deleting it)
_MANAGERS = {
    "argocd-controller": "Argo CD",
    "argocd-application-controller": "Argo CD",
    "kustomize-controller": "Flux",
    "helm-controller": "Flux",
    "config-policy-controller": "ACM",
    "multicluster-operators-subscription": "ACM",
    "application-manager": "ACM",
    "governance-policy-framework": "ACM",
}
LET_GO = {
    "Argo CD": "remove it from its Argo CD Application without deleting it (annotate it "
               "argocd.argoproj.io/sync-options: "
               "Delete=false, then drop it from the Application's source; with automated self-heal on, it comes back "
               "until then)",
    "Flux": "remove it from its Flux Kustomization or HelmRelease without deleting it (annotate it "
            "kustomize.toolkit.fluxcd.io/prune: disabled, then drop it from the source)",
    "ACM": "remove it from the ACM Policy or Subscription that places it on this cluster (set the policy's "
           "remediationAction to inform, or drop the object from it), so the hub stops enforcing it",
}


def managed_by(obj: Manifest) -> tuple[str, str] | None:
    """The GitOps tool that manages ``obj`` and what marks it so ("Argo CD", "Application argocd/platform"), or
    None."""
    meta = obj.get("metadata") or {}
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    for tool, kind in (("kustomize.toolkit.fluxcd.io", "Kustomization"), ("helm.toolkit.fluxcd.io", "HelmRelease")):
        if labels.get(f"{tool}/name"):
            return "Flux", f"{kind} {labels.get(f'{tool}/namespace', '?')}/{labels[f'{tool}/name']}"
    tracking = annotations.get("argocd.argoproj.io/tracking-id")
    if tracking:
        return "Argo CD", f"Application {tracking.split(':')[0]}"
    hosting = annotations.get("apps.open-cluster-management.io/hosting-subscription")
    if hosting:
        return "ACM", f"Subscription {hosting}"
    policy = labels.get("policy.open-cluster-management.io/policy")
    if policy:
        return "ACM", f"Policy {policy}"
    for entry in meta.get("managedFields") or []:
        tool = _MANAGERS.get(str(entry.get("manager") or ""))
        if tool is not None:
            if tool == "Argo CD" and labels.get("app.kubernetes.io/instance"):
                return tool, f"Application {labels['app.kubernetes.io/instance']}"
            return tool, f"its field manager {entry['manager']}"
    return None
