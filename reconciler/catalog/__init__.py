"""File-based catalogs (FBC): load, validate, compose, query, draw.

``reading`` is the one entry point for reading a catalog directory (``load``, and ``load_catalog``, the
pipeline's strict form); ``load`` parses files into the model, ``validate`` runs opm's rules, ``cache`` keeps
results by content digest, ``query`` lists packages, channels and bundles, ``graph`` draws upgrade graphs and
``source`` reads catalog images. Writing catalogs (``opm render``, templates) is ``reconciler/authoring/``."""

from __future__ import annotations

from reconciler.catalog.reading import (
    CatalogInvalid, ERROR, Finding, Loaded, RULES, WARNING, compose, errors_of, iter_blobs, load, load_catalog,
    validate,
)

__all__ = ["CatalogInvalid", "ERROR", "Finding", "Loaded", "RULES", "WARNING", "compose", "errors_of", "iter_blobs",
           "load", "load_catalog", "validate"]
