"""Typed, immutable domain objects shared by every stage.

Our own concepts (declarations, catalog entries, lock entries) are frozen
dataclasses. Kubernetes objects stay plain dicts (``Manifest``) and are read
through the helpers in ``model.kube`` rather than copied into classes.
"""
