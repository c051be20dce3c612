"""Writing catalogs: bundles into the blobs a file-based catalog lists them with, as opm does.

``render`` turns a bundle directory (registry+v1, k8s+v1, plain+v0) into its
``olm.bundle`` blob, as ``opm render`` does; ``template`` expands opm's
basic and semver templates into catalogs. Authoring reads bundles, so it
stands after the bundle stage, though what it writes is read by ``catalog/``.
"""
