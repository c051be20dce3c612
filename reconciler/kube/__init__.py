"""The one way to reach a cluster, shared by every stage that reads or writes one.

``client`` is ``Kube``: typed requests over the Kubernetes REST API, lazy
discovery, server-side apply, paged and metadata-only lists, and a recording
form that reports each accepted write. ``rest`` holds its transports (urllib3
for certificates, tokens and passwords, else the official client),
``kubeconfig`` reads kubeconfig files as kubectl merges them, ``retry`` says
which failures are retried and how long to wait, ``concurrent`` is the one
pool requests run in, and ``access`` asks the API server what an identity may
do (SubjectAccessReview).

This package is foundation: it imports nothing of the stages, so the stages
and the shells all reach a cluster the same way. The face imports nothing
itself, so a module that needs only ``retry`` does not load the client.
"""
