"""The RukPak and v2alpha1 examples of the design documents: accepted as written, or refused saying why.

The examples are read from ../shared/seeds (skipped when absent): each block
that starts at an ``apiVersion:`` or ``kind:`` line is one example, committed
to a repository of its own and read by the real repository reader.
ProvisionerClass documents are kept as written for the approval policy;
Install, Bundle, Instance, BundleDeployment and BundleInstance are refused
with the reason the kind means nothing to a GitOps repository.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from reconciler.errors import InputError
from reconciler.repo import REFUSED_KINDS, read_repository

SEEDS = Path(__file__).resolve().parents[3] / "shared" / "seeds"
_KEY = re.compile(r"^[A-Za-z][\w.-]*:( .*)?$")
DECLARATION_KINDS = {"ProvisionerClass", *REFUSED_KINDS}
# examples whose text is not YAML as printed in the document: refused as such, naming the line
NOT_YAML = {"004-line954-Bundle": "line 7"}   # `olm.properties: -|` where `|-` was meant


def _blocks(text: str) -> list[tuple[int, str]]:
    lines, out, i = text.splitlines(), [], 0
    while i < len(lines):
        if not re.match(r"^(apiVersion|kind):", lines[i]):
            i += 1
            continue
        start, block = i, []
        while i < len(lines) and (_KEY.match(lines[i]) or lines[i].startswith((" ", "-")) or not lines[i].strip()):
            nxt = lines[i + 1] if i + 1 < len(lines) else ""
            if not lines[i].strip() and not (_KEY.match(nxt) or nxt.startswith((" ", "-"))):
                break
            block.append(lines[i])
            i += 1
        out.append((start + 1, "\n".join(block) + "\n"))
    return out


def _examples() -> list:
    if not SEEDS.is_dir():
        return []
    found = []
    for path in sorted(SEEDS.glob("*.txt")):
        for line, block in _blocks(path.read_text(encoding="utf-8")):
            kind = re.search(r"^kind: *(\S+)", block, re.M)
            if kind and kind.group(1) in DECLARATION_KINDS:
                ident = f"{path.name[:3]}-line{line}-{kind.group(1)}"
                found.append(pytest.param(kind.group(1), block, ident, id=ident))
    return found


EXAMPLES = _examples()


@pytest.mark.skipif(not SEEDS.is_dir(), reason="../shared/seeds is absent")
def test_the_seeds_have_declaration_examples_of_every_kind():
    kinds = {p.values[0] for p in EXAMPLES}
    assert {"ProvisionerClass", "Install", "Bundle", "Instance", "BundleDeployment"} <= kinds


@pytest.mark.parametrize("kind, text, ident", EXAMPLES)
def test_seed_example(tmp_path: Path, kind: str, text: str, ident: str) -> None:
    (tmp_path / "declarations.yaml").write_text(text)
    if ident in NOT_YAML:
        with pytest.raises(InputError) as err:
            read_repository(tmp_path)
        assert f"declarations.yaml: invalid YAML ({NOT_YAML[ident]}" in err.value.render()
        return
    if kind in REFUSED_KINDS:
        with pytest.raises(InputError) as err:
            read_repository(tmp_path)
        message = err.value.render()
        if "duplicate key" in message:  # the example repeats a key: strict decoding refuses it before its kind
            assert message.startswith("declarations.yaml: duplicate key ")
            return
        assert f"{kind} is not a declaration here" in message
        assert "declarations.yaml" in message and "spec.bundle" in message
        return
    if kind == "ProvisionerClass" and "approval: AllowAll |" in text:
        # The document lists the choices in place of a value: a user commits one of them.
        with pytest.raises(InputError) as err:
            read_repository(tmp_path)
        # (fragments that show only the parameters lack an apiVersion too, which is said first)
        assert ("parameters.approval must be one of AllowAll, DenyAll, Android, UserPermission" in err.value.message
                and "pick one" in err.value.hint) or "ProvisionerClass needs apiVersion" in err.value.message
        assert err.value.path == "declarations.yaml"
        return
    snapshot = read_repository(tmp_path)
    if kind == "ProvisionerClass":
        declared = [c for c in snapshot.provisioner_classes.values() if c.origin == "declarations.yaml"]
        assert len(declared) == 1 and declared[0].approval in ("AllowAll", "DenyAll", "Android", "UserPermission")
    assert snapshot.operators == ()


def test_a_provisioner_class_with_another_api_version_is_refused(tmp_path: Path) -> None:
    (tmp_path / "pc.yaml").write_text("apiVersion: example.com/v1\nkind: ProvisionerClass\nmetadata: {name: x}\n")
    with pytest.raises(InputError) as err:
        read_repository(tmp_path)
    assert "pc.yaml: ProvisionerClass needs apiVersion rukpak.io/v1 or core.rukpak.io/v1alpha1, not example.com/v1" \
        in err.value.render()


@pytest.mark.parametrize("api_version", ["rukpak.io/v1", "core.rukpak.io/v1alpha1"])
def test_provisioner_classes_are_read_with_their_policy(tmp_path: Path, api_version: str) -> None:
    doc = f"apiVersion: {api_version}\nkind: ProvisionerClass\nmetadata: {{name: deny}}\nprovisioner: x/y\n" \
          f"parameters: {{approval: DenyAll, policy: strict}}\n"
    (tmp_path / "classes.yaml").write_text(doc + "---\n" + doc.replace("deny", "allow").replace("DenyAll", "AllowAll"))
    snapshot = read_repository(tmp_path)
    classes = snapshot.provisioner_classes
    assert (classes["deny"].approval, classes["deny"].origin, classes["deny"].ignored_parameters) == (
        "DenyAll", "classes.yaml", ("policy",))
    assert (classes["allow"].approval, classes["allow"].origin) == ("AllowAll", "classes.yaml (document 2)")
    assert classes["olm.resolveset"].approval == "Android"  # the defaults stay
