"""Peer tools built from pinned Go modules with ``reconciler.gobuild``, one module per tool.

Each tool has a directory ``bench/peers/<tool>/`` holding its go.mod and
go.sum, and a Python module ``bench/peers/<tool>.py`` exposing a function that
returns the built executable's path (building it into the cache if missing).
"""
