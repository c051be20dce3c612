"""After an OLM v0 takeover: the CatalogSources that nothing uses any more, said in the run's notes.

A takeover retires the Subscriptions it adopts, not the CatalogSources they named: another Subscription may
still need one, and a CatalogSource is the cluster administrator's, not the install's. One that no
Subscription names any more still costs: catalog-operator polls it (and, for an image-based one, keeps its
registry pod running). So the takeover says which, with the command that deletes one; it deletes nothing.

``sources`` is read before the takeover deletes the Subscriptions (a GET each); ``unused`` after it, with one
LIST of the cluster's Subscriptions.
"""

from __future__ import annotations

from collections.abc import Iterable

from reconciler.kube.client import ApiError, Kube

GROUP = "operators.coreos.com"


def sources(kube: Kube, takeovers: Iterable) -> set[tuple[str, str]]:  # noqa: ANN001 - olmv0.Takeover
    """(namespace, name) of the CatalogSource each adopted Subscription still names."""
    info = kube.resource(f"{GROUP}/v1alpha1", "Subscription")
    out = set()
    for t in takeovers:
        sub = kube.get(info, t.namespace, t.subscription) if info is not None and t.subscription_exists else None
        spec = (sub or {}).get("spec") or {}
        if spec.get("source"):
            out.add((str(spec.get("sourceNamespace") or t.namespace), str(spec["source"])))
    return out


def unused(kube: Kube, named: set[tuple[str, str]], takeovers: Iterable, *, dry_run: bool) -> list[str]:
    """A note for each CatalogSource of ``named`` that still exists and that no Subscription but those taken
    over names (``takeovers``: in a dry run they are still there)."""
    if not named:
        return []
    subs, catalogs = kube.resource(f"{GROUP}/v1alpha1", "Subscription"), kube.resource(f"{GROUP}/v1alpha1",
                                                                                     "CatalogSource")
    if subs is None or catalogs is None:
        return []
    retired = {(t.namespace, t.subscription) for t in takeovers}
    try:
        used = {(str(s["spec"].get("sourceNamespace") or s["metadata"]["namespace"]), str(s["spec"].get("source")))
                for s in kube.list(subs) if (s["metadata"]["namespace"], s["metadata"]["name"]) not in retired
                and isinstance(s.get("spec"), dict)}
    except ApiError:
        return []   # not allowed to list them: nothing to say rather than something wrong
    notes = []
    for namespace, name in sorted(named - used):
        if kube.get(catalogs, namespace, name) is None:
            continue
        state = "will be used by no Subscription once the takeover is done" if dry_run else \
            "is used by no Subscription any more"
        notes.append(f"CatalogSource {namespace}/{name} {state}: nothing adopted needs it, and catalog-operator "
                     f"keeps polling it; delete it once nothing else does (`kubectl delete catalogsource -n "
                     f"{namespace} {name}`)")
    return notes
