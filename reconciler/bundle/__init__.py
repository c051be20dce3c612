"""Bundles: fetch by reference, read once, convert to plain Kubernetes manifests.

``formats`` is the single code path from a bundle reference to objects (``render``), per format
(``registry_v1``, ``k8s_v1``, ``plain_v0``); ``source`` fetches and pins a reference, ``content`` reads a bundle
once, and ``installed`` is the conversion stage's output for the pipeline."""

from __future__ import annotations

from reconciler.bundle.formats import (
    RenderedBundle, fetch, read_content, render, render_content,
)

__all__ = ["RenderedBundle", "fetch", "read_content", "render", "render_content"]
