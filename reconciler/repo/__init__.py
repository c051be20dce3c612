"""Reading the GitOps repository at a commit.

``snapshot`` reads a working tree into a ``RepoSnapshot`` (settings, declarations, catalog directories, the
lockfile, a fleet's clusters, the revision); ``identity`` says which repository a tree is, ``inputs`` which paths a
run read, ``fleet`` one cluster's view of a fleet, ``git`` fetches a remote, ``verify`` verifies a commit, ``commit``
writes one and ``watch`` watches a tree."""

from __future__ import annotations

from reconciler.repo.snapshot import (
    APPROVALS_DIR, BUNDLES_DIR, CATALOGS_DIR, CLUSTERS_DIR, CatalogSettings, MAX_TREE_DEPTH, POLICIES_DIR,
    RepoSnapshot, SETTINGS_FILE, Settings, git_revision, read_records, read_repository, read_settings
)

__all__ = ["APPROVALS_DIR", "BUNDLES_DIR", "CATALOGS_DIR", "CLUSTERS_DIR", "CatalogSettings", "MAX_TREE_DEPTH",
           "POLICIES_DIR", "RepoSnapshot", "SETTINGS_FILE", "Settings", "git_revision", "read_records",
           "read_repository", "read_settings"]
