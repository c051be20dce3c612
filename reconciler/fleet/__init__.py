"""A fleet: one repository, many clusters, each reconciled by its own reconciler.

There is no hub. Each cluster runs ``watch --cluster NAME`` against the same
repository, which is the only shared state; the commands here work across
the clusters from a workstation or CI:

* ``resolve.py``: every cluster's lockfile at once, one resolution per
  distinct set of facts (placed declarations, Kubernetes version, lockfile,
  what its stage holds), so a thousand clusters of five shapes cost five.
* ``status.py``: every cluster's Operators read concurrently through their
  kubeconfig contexts, as a matrix (table, JSON, YAML or one HTML page).
* ``promote.py``: a later stage gets a bundle only as a commit that copies
  the pins the previous stage runs healthy, with the evidence in the message.
* ``review.py``: a change reviewed across the fleet, clusters grouped by
  identical outcome.
"""
