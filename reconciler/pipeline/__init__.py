"""The reconcile pipeline: repository -> catalogs -> resolution -> bundles -> approval -> cluster -> status.

Each arrow is a call into one stage's package; this package only strings them together, so the command line,
the loop, the review and the fleet commands run exactly the same steps. ``source`` is what a run reads (a tree,
the commit it is, how it is verified), ``facts`` what the stages before the engine read of a cluster, once;
``resolution`` gathers the resolver's inputs (catalogs, installed state, pins, holds), ``offline`` composes
what follows it (the lock, the conversion), ``prepared`` is the half of a run that writes nothing, ``desired``
what the engine is asked to make true, and ``outcome`` the half that writes.
"""

from __future__ import annotations

from reconciler.pipeline.facts import ClusterFacts
from reconciler.pipeline.offline import Converted, convert, lock
from reconciler.pipeline.outcome import Outcome, apply, desired_operators, reconcile, same_intent
from reconciler.pipeline.prepared import Prepared, prepare
from reconciler.pipeline.resolution import installed_state, kubernetes_version, load_catalogs, pulling, resolve
from reconciler.pipeline.source import Source

__all__ = ["ClusterFacts", "Converted", "Outcome", "Prepared", "Source", "apply", "convert", "desired_operators",
           "installed_state", "kubernetes_version", "load_catalogs", "lock", "prepare", "pulling", "reconcile", "resolve",
           "same_intent"]
