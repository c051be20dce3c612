"""One reconciler instance as a KEP-3659 ApplySet: its parent object, its id, and its members.

Several repositories (or several reconcilers) may reconcile into one
cluster. Each is an *instance* (``instance:`` in reconciler.yaml, default
``default``) and reads, writes and prunes only its own status objects, which
carry ``reconciler.dev/instance=<name>``. Status objects written before
instances existed carry no instance label and belong to ``default``, which
labels them on its next write.

The instance's parent is a ConfigMap ``reconciler-instance-<name>`` in the
installer namespace, labelled ``applyset.kubernetes.io/id`` with the id
kubectl derives from the parent's name, namespace, kind and group, and
annotated with the tooling and the kinds and namespaces its members span.
Every member (each Operator's status object and every object applied for
it) is labelled ``applyset.kubernetes.io/part-of=<id>``, so
``kubectl get -l applyset.kubernetes.io/part-of=<id>`` lists what the
instance manages. The reconciler prunes by its own inventories, never by
these labels.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable

from reconciler import __version__
from reconciler.cluster.status.objects import Stamp
from reconciler.kube.client import Kube
from reconciler.model.kube import (
    ANNOTATION_GROUP_KINDS, ANNOTATION_NAMESPACES, ANNOTATION_TOOLING, DEFAULT_INSTANCE, FIELD_MANAGER,
    LABEL_APPLYSET_ID, LABEL_INSTANCE, LABEL_MANAGED_BY, MANAGED_BY, Manifest, ObjectRef, applyset_parent,
    instance_applyset_id,
)

TOOLING = f"reconciler/v{__version__}"


@dataclass(frozen=True)
class Instance:
    """A reconciler instance: its name, the namespace of its ApplySet parent, and the repository it reconciles.

    ``repository`` is recorded on every status object the instance writes (``repo/identity.py``), and
    ``cluster``, in a fleet, the name of the cluster it is;
    ``knows_revision`` tells whether a commit is in that repository's history, the evidence that a status
    object written before repositories were recorded came from it.
    """

    name: str = DEFAULT_INSTANCE
    namespace: str = "reconciler-system"
    repository: str = ""
    cluster: str = ""    # the fleet's cluster this instance reconciles ("" outside a fleet)
    knows_revision: Callable[[str | None], bool] = field(default=lambda revision: False, compare=False, repr=False)

    @property
    def id(self) -> str:
        return instance_applyset_id(self.name, self.namespace)

    @property
    def parent_name(self) -> str:
        return applyset_parent(self.name)[1]

    def stamp(self) -> Stamp:
        """What every status object this instance writes carries."""
        return Stamp(self.name, self.id, self.repository, self.cluster)



def group_kind(ref: ObjectRef) -> str:
    return f"{ref.kind}.{ref.group}" if ref.group else ref.kind


def parent(instance: Instance, members: Iterable[ObjectRef]) -> Manifest:
    """The parent ConfigMap for these members: kinds and other namespaces sorted, as the KEP asks."""
    refs = list(members)
    kinds = sorted({group_kind(r) for r in refs})
    namespaces = sorted({r.namespace for r in refs if r.namespace and r.namespace != instance.namespace})
    annotations = {ANNOTATION_TOOLING: TOOLING, ANNOTATION_GROUP_KINDS: ",".join(kinds)}
    if namespaces:
        annotations[ANNOTATION_NAMESPACES] = ",".join(namespaces)
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": instance.parent_name, "namespace": instance.namespace,
                         "labels": {LABEL_APPLYSET_ID: instance.id, LABEL_INSTANCE: instance.name,
                                    LABEL_MANAGED_BY: MANAGED_BY},
                         "annotations": annotations}}


def write_parent(kube: Kube, instance: Instance, members: Iterable[ObjectRef]) -> None:
    """Apply the parent (creating the namespace it lives in when missing); no write when it is current."""
    body = parent(instance, members)
    info = kube.resource("v1", "ConfigMap")
    assert info is not None
    live = kube.get(info, instance.namespace, instance.parent_name)
    if live is not None:
        meta = live.get("metadata") or {}
        want = body["metadata"]
        if all((meta.get("labels") or {}).get(k) == v for k, v in want["labels"].items()) and \
                {k: v for k, v in (meta.get("annotations") or {}).items() if k.startswith("applyset.")} \
                == want["annotations"]:
            return
    else:
        ns_info = kube.resource("v1", "Namespace")
        assert ns_info is not None
        if kube.get(ns_info, "", instance.namespace) is None:
            kube.apply(ns_info, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": instance.namespace}},
                       field_manager=FIELD_MANAGER, dry_run=False)
    kube.apply(info, body, field_manager=FIELD_MANAGER, dry_run=False)
