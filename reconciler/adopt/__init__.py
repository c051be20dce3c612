"""``reconciler adopt``: write into the repository what OLM runs, so that git describes the cluster as it is.

``adoption`` is the command's flow (declarations, lock entries and approvals, in a scratch copy first); ``olmv0``
and ``olmv1`` read what OLM v0 and OLM v1 installed, and ``matching`` compares an operator applied without OLM with
its bundle, object by object. Taking the installs over is the ownership policy's
(``cluster/ownership/takeover/``)."""

from __future__ import annotations

from reconciler.adopt.adoption import Adopted, Adoption, Selection, adopt, declaration

__all__ = ["Adopted", "Adoption", "Selection", "adopt", "declaration"]
