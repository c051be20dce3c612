"""Taking over what another installer runs, inside the ownership policy: OLM v0's installs (``olmv0``), OLM v1's
ClusterExtensions (``olmv1``) and objects applied without OLM that a declaration consents to take (``existing``).
``around`` is what one sync does around the engine for all three."""
