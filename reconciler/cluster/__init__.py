"""What a run does to a cluster, in the order it does it: ``apply/`` (the engine: plan and write), ``health/``
(judge what was applied), ``status/`` (report it on the ``Operator`` objects) and ``ownership/`` (the policy
around the engine: inventories, takeovers, pruning). Reaching a cluster at all is ``reconciler/kube/``."""
