"""A declarative GitOps reconciler for Kubernetes operators.

Data flows one way: repository -> catalogs -> resolution -> bundles ->
manifests -> plan -> cluster -> status. Each arrow is a function in its own
subpackage; ``reconciler.pipeline`` strings them together and the CLI and the
loop are thin shells around it.
"""

__version__ = "0.1.0"
