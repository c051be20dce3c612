"""docs/catalogs.md, "Importing a cluster's catalogs": its commands run as printed against an index in a registry
on loopback (``$INDEX``), the index changed between the two imports; its settings block is valid settings."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from tests.catalog.test_import import push_index
from tests.docblocks import ROOT, indented_block

FIRST = 'reconciler catalog import . --image "$INDEX" --name community --package ack-s3-controller --package cert-manager'


def test_the_import_commands_run_as_printed(tmp_path, oci_registry):
    block = indented_block("docs/catalogs.md", FIRST)
    assert len(block) == 3
    index = {"ack-s3-controller": ("1.10.0",), "cert-manager": ("1.12.0",), "odoo-operator": ("0.0.2",)}
    ref = push_index(tmp_path, oci_registry, "docs/index", "v1", index)
    repo = tmp_path / "gitops"
    repo.mkdir()
    env = {**os.environ, "INDEX": ref, "HOME": str(tmp_path / "home"),
           "PATH": f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}"}
    outputs = []
    for i, line in enumerate(block):
        if i == 2:   # the index moves on before the next import
            push_index(tmp_path, oci_registry, "docs/index", "v1", dict(index, **{"cert-manager": ("1.12.0", "1.13.0")}))
        done = subprocess.run(["bash", "-c", line], cwd=repo, env=env, capture_output=True, text=True, timeout=300)
        said = re.search(r"# exit (\d+): (.*)$", line)
        assert done.returncode == (int(said.group(1)) if said else 0), f"{line}\n{done.stdout}{done.stderr}"
        if said:
            assert said.group(2) in done.stdout, done.stdout
        outputs.append(done.stdout)
    assert "2 packages, 2 channels, 2 bundles: valid" in outputs[1]
    printed = indented_block("docs/catalogs.md", "catalogs/community from registry.example.com/index:v1 (sha256:...), "
                                                 "was sha256:...")
    assert printed[1:] == outputs[2].splitlines()[1:3]   # what the document shows is what the import says


def test_the_settings_block_is_valid_settings(tmp_path):
    from reconciler.repo import read_settings

    lines = (ROOT / "docs/catalogs.md").read_text().split("```yaml\ncatalogs:\n  redhat:\n", 1)[1].split("```", 1)[0]
    (tmp_path / "reconciler.yaml").write_text("catalogs:\n  redhat:\n" + lines)
    settings = read_settings(tmp_path)
    assert settings.catalogs["redhat"].packages == ("cert-manager", "odoo-operator")
    (rule,) = settings.mirrors
    assert (rule.source, rule.pull_from, rule.never_contact_source) == ("registry.redhat.io", "digest-only", True)
