"""Every refusal of `adopt` names the object that causes it: the reason each ``Unmapped`` gives (read from the
source, so a new one is held to it) names a kind of object (the CatalogSource, the InstallPlan, the
OperatorGroup, ...) or the repository's catalog or bundle, never only a state."""

from __future__ import annotations

import ast

from tests.support.paths import ROOT

# What a refusal may name as its cause: OLM's objects, the install's own parts, the repository's.
CAUSES = ("Subscription", "ClusterServiceVersion", "OperatorGroup", "CatalogSource", "InstallPlan",
          "ClusterExtension", "ClusterObjectSet", "spec.config", "namespace", "package", "catalog", "bundle", "channel",
          "source")


def _reasons() -> list[tuple[str, str]]:
    out = []
    for path in sorted((ROOT / "reconciler" / "adopt").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            # Unmapped(code, what, reason, hint): the reason is the third
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Unmapped" and len(node.args) >= 3:
                text = " ".join(n.value for n in ast.walk(node.args[2])
                                if isinstance(n, ast.Constant) and isinstance(n.value, str))
                out.append((f"{path.name}:{node.lineno}", text))
    return out


def test_every_adopt_refusal_names_its_cause():
    reasons = _reasons()
    assert len(reasons) > 25, reasons   # the source was read
    vague = [(where, text) for where, text in reasons if not any(c in text for c in CAUSES)]
    assert not vague, vague

