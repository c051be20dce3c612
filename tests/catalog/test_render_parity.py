"""`reconciler catalog render` writes the blob `opm render` writes for the same bundle directory.

Compared whole (every field, every property, in order, ``olm.bundle.object``
data byte for byte), and as ``-o json`` text byte for byte, on a sample of the
real bundles of ../shared/corpus and on synthetic bundles with every source of
properties and with values JSON writers disagree on. Skipped when opm is not
built (tests/catalog/test_corpus.py says how) or the corpus is absent.
Deliberate differences (docs/catalogs.md): a ``dependencies.yaml`` or
``properties.yaml`` that does not parse is an error here, where opm drops it.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from reconciler.authoring.render import blob_json, render_bundle_dir
from reconciler.errors import BundleError
from tests.catalog.helpers import CORPUS
from tests.catalog.test_corpus import opm
from tests.unit.helpers import write
from tests.support.parts import not_tested

SAMPLE = 60


def _opm_render_text(directory: Path) -> str:
    """What ``opm render DIR -o json`` prints."""
    exe = opm()
    if exe is None:
        not_tested("opm", "opm is not built (run `make peers` or `python -m bench.catalog_bench` once) and not on PATH")
    proc = subprocess.run([exe, "render", str(directory), "-o", "json"], capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.decode()


def _opm_render(directory: Path) -> dict:
    return json.loads(_opm_render_text(directory))


def _same_as_opm(directory: Path) -> dict:
    """Our blob for ``directory``, checked equal to opm's as data and as ``-o json`` text."""
    ours, text = render_bundle_dir(directory), _opm_render_text(directory)
    assert ours == json.loads(text)
    assert blob_json(ours) == text
    return ours


def _sample() -> list[Path]:
    if not (CORPUS / "operators").is_dir():
        return []
    from bench.bundle_corpus import find_bundles

    bundles, _ = find_bundles(CORPUS / "operators")
    step = max(1, len(bundles) // SAMPLE)
    return bundles[::step]


@pytest.mark.corpus(missing=not _sample(), reason="../shared/corpus is absent")
@pytest.mark.parametrize("directory", _sample(), ids=lambda p: str(p.relative_to(CORPUS / "operators")))
def test_render_matches_opm_on_corpus_bundles(directory: Path):
    if "eventing-kogito" in str(directory):   # its dependencies.yaml does not parse: opm drops it, we refuse
        with pytest.raises(BundleError, match="dependencies.yaml"):
            render_bundle_dir(directory)
        return
    _same_as_opm(directory)


CSV = """
apiVersion: operators.coreos.com/v1alpha1
kind: ClusterServiceVersion
metadata:
  name: parity.v1.2.3
  annotations:
    olm.properties: '[{"type": "olm.maxOpenShiftVersion", "value": "4.16"}, {"type": "example.com/zone", "value": {"b": 2, "a": 1}}]'
    description: "tags <b> & <i> are escaped by Go's JSON"
spec:
  version: 1.2.3
  displayName: Parity
  minKubeVersion: 1.25.0
  relatedImages:
    - {name: operand, image: quay.io/demo/operand@sha256:0000000000000000000000000000000000000000000000000000000000000001}
    - {image: quay.io/demo/unnamed:1}
  customresourcedefinitions:
    owned:
      - {name: widgets.demo.io, kind: Widget, version: v2}
      - {name: gadgets.demo.io, kind: Gadget, version: v1}
    required:
      - {name: backups.backup.io, kind: Backup, version: v1}
      - {name: certificates.cert-manager.io, kind: Certificate, version: v1}
  apiservicedefinitions:
    owned:
      - {group: metrics.demo.io, version: v1beta1, kind: NodeMetric, name: nodemetrics, deploymentName: op}
    required:
      - {group: custom.metrics.k8s.io, version: v1beta2, kind: MetricValueList, name: metricvaluelists}
  install:
    strategy: deployment
    spec:
      deployments:
        - name: op
          spec:
            replicas: 1
            selector: {matchLabels: {app: op}}
            template:
              metadata: {labels: {app: op}}
              spec:
                initContainers: [{name: init, image: quay.io/demo/init:1}]
                containers:
                  - {name: manager, image: quay.io/demo/op:1.2.3}
                  - {name: sidecar, image: "quay.io/demo/operand@sha256:0000000000000000000000000000000000000000000000000000000000000001"}
"""

WIDGETS = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.demo.io}
spec:
  group: demo.io
  scope: Namespaced
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  versions:
    - name: v1alpha1
      served: true
      storage: false
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
    - name: v1
      served: true
      storage: false
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
    - name: v2
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            ratio: {type: number, minimum: 0.5, maximum: 1.0, default: 1.0}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: second-document-opm-ignores}
"""

GADGETS = """
apiVersion: apiextensions.k8s.io/v1beta1
kind: CustomResourceDefinition
metadata: {name: gadgets.demo.io}
spec:
  group: demo.io
  version: v1
  scope: Cluster
  names: {kind: Gadget, plural: gadgets}
  versions:
    - {name: v1, served: true, storage: true}
    - {name: v1beta1, served: true, storage: false}
"""

DEPENDENCIES = """
dependencies:
  - type: olm.package
    value: {packageName: etcd, version: ">=0.9.0 <0.10.0"}
  - type: olm.gvk
    value: {group: etcd.database.coreos.com, kind: EtcdCluster, version: v1beta2}
  - type: olm.gvk
    value: {group: backup.io, kind: Backup, version: v1}
  - type: olm.constraint
    value:
      failureMessage: needs a small package
      cel: {rule: "properties.exists(p, p.type == 'olm.package' && semver_compare(p.value.version, '1.5.0') < 0)"}
"""

PROPERTIES = """
properties:
  - type: olm.label
    value: {label: fast}
  - type: olm.gvk
    value: {group: extra.demo.io, kind: Extra, version: v1}
  - type: olm.package
    value: {packageName: ignored-by-opm, version: 9.9.9}
  - type: example.com/nested
    value: {z: [1, 2], a: {c: true, b: null}}
"""


def _parity_bundle(root: Path, csv: str = CSV, *, crds: bool = True) -> None:
    """The synthetic bundle's annotations, CSV and (unless ``crds`` is false) its two CRDs."""
    write(root, "metadata/annotations.yaml", """
        annotations:
          operators.operatorframework.io.bundle.mediatype.v1: registry+v1
          operators.operatorframework.io.bundle.package.v1: parity
        """)
    write(root, "manifests/parity.clusterserviceversion.yaml", csv)
    if crds:
        write(root, "manifests/demo.io_widgets.yaml", WIDGETS)
        write(root, "manifests/demo.io_gadgets.yaml", GADGETS)


def test_render_matches_opm_on_a_bundle_with_every_property_source(tmp_path):
    write(tmp_path, "metadata/annotations.yaml", """
        annotations:
          operators.operatorframework.io.bundle.mediatype.v1: registry+v1
          operators.operatorframework.io.bundle.manifests.v1: manifests/
          operators.operatorframework.io.bundle.metadata.v1: metadata/
          operators.operatorframework.io.bundle.package.v1: parity
          operators.operatorframework.io.bundle.channels.v1: stable
        """)
    write(tmp_path, "metadata/dependencies.yaml", DEPENDENCIES)
    write(tmp_path, "metadata/properties.yaml", PROPERTIES)
    write(tmp_path, "manifests/parity.clusterserviceversion.yaml", CSV)
    write(tmp_path, "manifests/demo.io_widgets.yaml", WIDGETS)
    write(tmp_path, "manifests/demo.io_gadgets.yaml", GADGETS)
    write(tmp_path, "manifests/op-metrics_v1_service.yaml",
          "apiVersion: v1\nkind: Service\nmetadata: {name: op-metrics}\nspec: {ports: [{port: 8443}]}\n")
    ours = _same_as_opm(tmp_path)
    props = [(p["type"], p["value"]) for p in ours["properties"]]
    # the sources the fixture means to cover are all there
    assert ("olm.gvk", {"group": "demo.io", "kind": "Widget", "version": "v1alpha1"}) in props
    assert ("olm.gvk", {"group": "metrics.demo.io", "kind": "NodeMetric", "version": "v1beta1"}) in props
    assert ("olm.gvk.required", {"group": "custom.metrics.k8s.io", "kind": "MetricValueList",
                                 "version": "v1beta2"}) in props
    assert ("olm.package.required", {"packageName": "etcd", "versionRange": ">=0.9.0 <0.10.0"}) in props
    assert ("olm.package", {"packageName": "parity", "version": "1.2.3"}) in props
    assert ("olm.maxOpenShiftVersion", "4.16") in props and ("olm.label", {"label": "fast"}) in props
    assert [t for t, _ in props].count("olm.bundle.object") == 4


def test_dependencies_are_read_from_whichever_metadata_file_has_them(tmp_path):
    """As opm: pelorus-operator ships its dependencies in a file named properties.yaml."""
    _parity_bundle(tmp_path)
    write(tmp_path, "metadata/properties.yaml", DEPENDENCIES)
    ours = render_bundle_dir(tmp_path)
    assert {"type": "olm.package.required", "value": {"packageName": "etcd", "versionRange": ">=0.9.0 <0.10.0"}} \
        in ours["properties"]
    assert ours == _opm_render(tmp_path)


@pytest.mark.parametrize("text,message", [("dependencies: [\n", "invalid YAML"),
                                          ("- a\n", "must be a mapping with a 'dependencies' list, not a list")])
def test_a_broken_dependencies_file_is_refused_not_dropped(tmp_path, text, message):
    """A deliberate difference: opm drops a file it cannot decode, and the bundle's dependencies with it."""
    _parity_bundle(tmp_path, crds=False)
    write(tmp_path, "metadata/dependencies.yaml", text)
    with pytest.raises(BundleError, match=message) as err:
        render_bundle_dir(tmp_path)
    assert err.value.path.endswith("metadata/dependencies.yaml")


def test_related_images_sharing_an_image_keep_the_csv_order(tmp_path):
    """A documented difference: opm sorts relatedImages by image with an unstable sort, so entries that
    share an image under different names may come out in either order; here they keep the CSV's order."""
    names = [f"img-{i:02d}" for i in range(16)]
    # two names per image, listed in reverse image order, so sorting must move every pair
    related = "".join(f"    - {{name: {n}, image: 'quay.io/demo/x{15 - i // 2:02d}@sha256:{i // 2:064x}'}}\n"
                      for i, n in enumerate(names))
    csv = CSV.replace("  relatedImages:\n", "  relatedImages:\n" + related, 1)
    _parity_bundle(tmp_path, csv)
    ours = render_bundle_dir(tmp_path)["relatedImages"]
    pairs = [r for r in ours if r["name"].startswith("img-")]
    assert [r["image"] for r in pairs] == sorted(r["image"] for r in pairs)
    for first, second in zip(pairs[::2], pairs[1::2]):
        assert first["image"] == second["image"] and first["name"] < second["name"]   # CSV order within a tie
    theirs = _opm_render(tmp_path)["relatedImages"]
    assert [r["image"] for r in ours] == [r["image"] for r in theirs]
    key = lambda r: (r["image"], r["name"])   # noqa: E731 - the same entries, whatever opm's order of ties
    assert sorted(ours, key=key) == sorted(theirs, key=key)


def test_json_text_matches_opm_where_json_writers_disagree(tmp_path):
    """Key order, HTML characters, line separators, non-ASCII text, and numbers as Go writes a float64."""
    _parity_bundle(tmp_path)
    write(tmp_path, "metadata/properties.yaml", """
        properties:
          - type: example.com/note
            value: {zeta: "a<b & c>d", alpha: "line\\u2028separator, caf\\u00e9, \\U0001F600 \\x01", mid: [3, 1.5]}
          - type: example.com/numbers
            value: {big: 1180591620717411303424, small: 0.000001, tiny: 1.5e-7, whole: 2.0, neg: -0.25}
        """)
    ours = _same_as_opm(tmp_path)
    assert any(p["type"] == "example.com/numbers" for p in ours["properties"])
