"""What an identity may do, as the API server's authorisers say: one SubjectAccessReview per permission atom.

The approval stage asks it of an approver (``UserPermission``), and the
installers poll it until the RBAC they bound takes effect; both ask the same
question the same way, and a run asks each question once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reconciler.model.permissions import CLUSTER, Atom
from reconciler.model.provisioner import Identity

if TYPE_CHECKING:
    from collections.abc import Callable

    from reconciler.kube.client import Kube


def access_check(kube: Kube) -> Callable[[Identity, Atom], bool]:
    """SubjectAccessReview, one per atom, cached for the run."""
    cache: dict[tuple[Identity, Atom], bool] = {}

    def check(identity: Identity, atom: Atom) -> bool:
        key = (identity, atom)
        if key not in cache:
            spec: dict = {"user": identity.user, "groups": list(identity.groups)}
            if atom.url:
                spec["nonResourceAttributes"] = {"verb": atom.verb, "path": atom.url}
            else:
                resource, _, sub = atom.resource.partition("/")
                attrs = {"verb": atom.verb, "group": atom.api_group, "resource": resource}
                if sub:
                    attrs["subresource"] = sub
                if atom.name:
                    attrs["name"] = atom.name
                if atom.scope != CLUSTER:
                    attrs["namespace"] = atom.scope
                spec["resourceAttributes"] = attrs
            review = kube.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                                  body={"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                                        "spec": spec})
            cache[key] = bool((review or {}).get("status", {}).get("allowed"))
        return cache[key]
    return check
