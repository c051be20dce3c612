"""The approval stage, between manifests and the cluster: no bundle gains a permission nobody approved.

``evaluate`` judges every converted bundle, one ``Decision`` per Operator; ``required`` says what a bundle
needs, ``policy`` decides one policy, ``records`` keeps approvals in git, ``guardrails`` are the policies every
rendered object must pass, and ``stage`` is the stage as the pipeline runs it."""

from __future__ import annotations

from reconciler.approve.evaluate import (
    Atom, CLUSTER, Decision, PermissionSet, Requirements, Rule, Subject, decide, evaluate, required_permissions,
)

__all__ = ["Atom", "CLUSTER", "Decision", "PermissionSet", "Requirements", "Rule", "Subject", "decide", "evaluate",
           "required_permissions"]
