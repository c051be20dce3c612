"""Resolution: declarations + catalogs + what is installed -> the exact bundles to install.

``resolver`` is the ``Resolver`` interface and ``SatResolver``: requirements from the declarations, the solution
as ``Selection``s and ``Update``s; ``universe`` builds the candidates as resolution reaches them and holds deppy's
preference orders and the upgrade edges; ``sat`` encodes the problem for python-sat and explains an unsatisfiable
one."""

from __future__ import annotations

from reconciler.resolve.resolver import (
    Deprecation, Resolution, ResolutionRequest, Resolver, SatResolver, Selection, UNSATISFIABLE, Unsatisfiable,
    Update
)
from reconciler.resolve.sat import UPGRADE_EDGES

__all__ = ["Deprecation", "Resolution", "ResolutionRequest", "Resolver", "SatResolver", "Selection", "UNSATISFIABLE",
           "UPGRADE_EDGES", "Unsatisfiable", "Update"]
