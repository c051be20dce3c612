"""A fleet on real local control planes: one repository, two clusters reconciled each with --cluster, placement
respected, a promotion refused while the earlier stage is unhealthy or within the soak and then allowed, and
`fleet status` over both (also with one stopped, and as a page rendered by a real browser).

Cluster ``dev`` is the session's control plane (controllers and kwok nodes: workloads roll out and become
healthy); cluster ``prod-eu`` is a second kube-apiserver on the same etcd under its own prefix
(``localcluster.virtual``), a real API server without controllers.
"""

from __future__ import annotations

import html.parser
import json
import shutil
import subprocess
import time
from pathlib import Path

import pygit2
import pytest

from reconciler.kube.client import Kube
from reconciler.localcluster.virtual import VirtualCluster, kubeconfig_with_contexts
from tests.e2e.support import cli, get
from tests.support.repo import commit_all, init
from tests.support.parts import not_tested

pytestmark = pytest.mark.cluster

FLEET = Path(__file__).resolve().parents[2] / "examples" / "fleet-repo"
CHROMIUM = Path("/usr/bin/chromium")
GADGET = """\
apiVersion: operators.coreos.com/v1
kind: Operator
metadata:
  name: gadget
spec:
  bundle:
    name: gadget.v1.0.0
    spec:
      refs: [file://bundles/gadget]
      class: plain+v0
  install:
    namespace: gadget-system
  placement:
    clusterSelector: {matchLabels: {env: dev}}
"""


def cordon(kube: Kube, nodes: list[str], unschedulable: bool) -> None:
    info = kube.resource("v1", "Node")
    for name in nodes:
        kube.request("PATCH", info.path("", name), body={"spec": {"unschedulable": unschedulable or None}},
                     content_type="application/merge-patch+json")


@pytest.fixture
def prod(control_plane):
    cluster = VirtualCluster(control_plane, "prod-eu").start()
    yield cluster
    cluster.stop()


@pytest.fixture
def fleet(tmp_path: Path, control_plane, prod, capsys):
    """The example fleet cut to dev and prod-eu (stages dev, prod), plumbus pinned to 1.0.0 and gadget placed on
    dev only; a kubeconfig with a context per cluster. Afterwards, both clusters are emptied."""
    root = tmp_path / "fleet"
    shutil.copytree(FLEET, root)
    for name in ("staging", "prod-us"):
        (root / "clusters" / f"{name}.yaml").unlink()
        shutil.rmtree(root / "clusters" / name)
    (root / "reconciler.yaml").write_text("instance: fleet\nstages: [dev, prod]\n")
    decl = root / "operators" / "plumbus.yaml"
    decl.write_text(decl.read_text().replace('version: ">=1.0.0 <2.0.0"', 'version: "1.0.0"').replace(
        "{matchLabels: {region: us}}\n      installNamespace: plumbus-us",
        "{matchLabels: {env: prod}}\n      installNamespace: plumbus-prod"))
    (root / "bundles" / "gadget" / "manifests").mkdir(parents=True)
    (root / "bundles" / "gadget" / "manifests" / "config.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: gadget-config, namespace: gadget-system}\ndata: {mode: test}\n")
    (root / "operators" / "gadget.yaml").write_text(GADGET)
    for lock in root.glob("clusters/*/olm.lock"):
        lock.unlink()
    init(root)
    kubeconfig = kubeconfig_with_contexts(tmp_path / "fleet.kubeconfig", {
        "dev": (control_plane.server, control_plane.kubeconfig_path),
        "prod-eu": (prod.server, prod.kubeconfig_path)})
    assert cli("resolve", str(root), capsys=capsys).code == 0
    assert cli("approve", str(root), "--all", capsys=capsys).code == 0
    commit_all(root, "a fleet of two")
    yield root, kubeconfig
    for name in ("plumbus", "gadget"):
        (root / "operators" / f"{name}.yaml").unlink()
    (root / "reconciler.yaml").write_text("instance: fleet\nstages: [dev, prod]\nallowEmpty: true\n")
    commit_all(root, "empty")
    for name in ("dev", "prod-eu"):
        if name == "prod-eu" and prod.pid is None:
            continue
        run = cli("reconcile", str(root), "--cluster", name, "--kubeconfig", str(kubeconfig), "--no-wait",
                  capsys=capsys)
        assert run.code == 0, run.err


def test_each_cluster_reconciles_its_own_placement_and_promotion_needs_evidence(fleet, prod, control_plane, capsys):
    root, kc = fleet
    dev, prod_kube = Kube(control_plane.admin_client()), Kube(prod.admin_client())
    run = cli("reconcile", str(root), "--cluster", "dev", "--kubeconfig", str(kc), "--timeout", "120s",
              capsys=capsys)
    assert run.code == 0, run.err + run.out
    run = cli("reconcile", str(root), "--cluster", "prod-eu", "--kubeconfig", str(kc), "--no-wait", capsys=capsys)
    assert run.code == 0, run.err + run.out
    # placement: gadget only on dev; plumbus everywhere, in prod's own namespace there
    assert get(dev, "v1", "ConfigMap", "gadget-config", "gadget-system") is not None
    assert get(prod_kube, "v1", "ConfigMap", "gadget-config", "gadget-system") is None
    assert get(dev, "apps/v1", "Deployment", "plumbus-controller", "plumbus-system") is not None   # 1.0.0's name
    assert get(prod_kube, "apps/v1", "Deployment", "plumbus-controller", "plumbus-prod") is not None
    status = get(prod_kube, "reconciler.dev/v1alpha1", "Operator", "plumbus")
    assert status["metadata"]["annotations"]["reconciler.dev/cluster"] == "prod-eu"
    # the wrong context for a cluster is refused: dev's kubeconfig context used for prod-eu
    wrong = cli("reconcile", str(root), "--cluster", "prod-eu", "--kubeconfig", str(kc), "--context", "dev",
                "--dry-run", capsys=capsys)
    assert wrong.code == 2 and "holds the Operators of cluster 'dev'" in wrong.err, wrong.err

    # dev moves on to 1.1.0 (the declaration widens); prod stays where its lockfile holds it
    decl = root / "operators" / "plumbus.yaml"
    decl.write_text(decl.read_text().replace('version: "1.0.0"', 'version: ">=1.0.0 <2.0.0"'))
    assert cli("resolve", str(root), capsys=capsys).code == 0
    assert "plumbus.v1.1.0" in (root / "clusters/dev/olm.lock").read_text()
    assert "plumbus.v1.1.0" not in (root / "clusters/prod-eu/olm.lock").read_text()
    assert cli("approve", str(root), "--all", capsys=capsys).code == 0
    commit_all(root, "plumbus 1.x")
    # dev's upgrade cannot roll out while its nodes are cordoned: it is applied, and not healthy
    nodes = dev.resource("v1", "Node")
    names = [n["metadata"]["name"] for n in dev.list(nodes)]
    cordon(dev, names, True)
    try:
        run = cli("reconcile", str(root), "--cluster", "dev", "--kubeconfig", str(kc), "--no-wait", capsys=capsys)
        assert run.code == 0, run.err + run.out
        pods = dev.resource("v1", "Pod")
        deadline = time.monotonic() + 60
        while not any(c.get("type") == "PodScheduled" and c.get("status") == "False"
                      for p in dev.list(pods, namespace="plumbus-system")
                      for c in (p.get("status") or {}).get("conditions") or []):
            assert time.monotonic() < deadline, "the scheduler never reported the new pod"
            time.sleep(0.5)
        # the next reconcile (as the cluster's loop makes) judges the rollout again: its cause is the pod
        run = cli("reconcile", str(root), "--cluster", "dev", "--kubeconfig", str(kc), "--no-wait", capsys=capsys)
        assert run.code == 0, run.err + run.out
        cause = "cannot be scheduled (Unschedulable): 0/3 nodes are available: 3 node(s) were unschedulable"
        refused = cli("promote", str(root), "--to", "prod", "--soak", "0", "--kubeconfig", str(kc), capsys=capsys)
        assert refused.code == 2, refused.out
        assert "dev: plumbus plumbus.v1.1.0 is not healthy (Progressing" in refused.out, refused.out
        assert cause in refused.out, refused.out   # the evidence names the cause, not only the symptom
        seen = json.loads(cli("fleet", "status", str(root), "--kubeconfig", str(kc), "-o", "json",
                              capsys=capsys).out)
        cell = next(op for c in seen["clusters"] if c["name"] == "dev" for op in c["operators"]
                    if op["operator"] == "plumbus")
        assert cell["health"] == "Progressing" and cause in cell["message"], cell
        waiting = cli("promote", str(root), "--all", "--soak", "0", "--kubeconfig", str(kc), "-o", "json",
                      capsys=capsys)   # the scheduled form: still rolling out is not ready yet, not refused
        assert waiting.code == 6, waiting.out
        kinds = {f["kind"] for s in json.loads(waiting.out)["stages"] for ev in s["evidence"] for f in ev["findings"]}
        assert kinds == {"progressing"}, waiting.out
    finally:
        cordon(dev, names, False)
    run = cli("reconcile", str(root), "--cluster", "dev", "--kubeconfig", str(kc), "--timeout", "120s",
              capsys=capsys)
    assert run.code == 0, run.err + run.out
    # refused within the soak time
    refused = cli("promote", str(root), "--to", "prod", "--soak", "1h", "--kubeconfig", str(kc), capsys=capsys)
    assert refused.code == 2, refused.out
    assert "less than the soak time 1h00m" in refused.out and "Refused" in refused.out
    assert "plumbus.v1.1.0" not in (root / "clusters/prod-eu/olm.lock").read_text()
    # allowed once the evidence holds: a commit with the evidence in its message
    head = pygit2.Repository(str(root)).head.target
    done = cli("promote", str(root), "--to", "prod", "--soak", "0", "--kubeconfig", str(kc), capsys=capsys)
    assert done.code == 0, done.out + done.err
    repo = pygit2.Repository(str(root))
    assert repo.head.target != head
    message = repo[repo.head.target].message
    assert message.startswith("Promote plumbus plumbus.v1.1.0 to prod") and "dev: plumbus.v1.1.0 healthy" in message
    assert "plumbus.v1.1.0" in (root / "clusters/prod-eu/olm.lock").read_text()
    assert "  prod-eu: plumbus plumbus.v1.0.0 -> plumbus.v1.1.0\n" in message
    # a second run, as a scheduled job runs it, is a no-op: prod already pins what dev proved
    promoted = repo.head.target
    again = cli("promote", str(root), "--all", "--soak", "0", "--kubeconfig", str(kc), capsys=capsys)
    assert again.code == 0, again.out + again.err
    assert "Nothing to promote" in again.out and pygit2.Repository(str(root)).head.target == promoted
    # the diff of the promotion shows what moves where
    review = cli("diff", str(root), "--base", "HEAD^", capsys=capsys)
    assert review.code == 1 and "prod-eu (1 cluster): plumbus 1.0.0 -> 1.1.0" in review.out, review.out


def test_fleet_status_reads_every_cluster_and_reports_an_unreachable_one(fleet, prod, control_plane, capsys):
    root, kc = fleet
    for name in ("dev", "prod-eu"):
        run = cli("reconcile", str(root), "--cluster", name, "--kubeconfig", str(kc), "--no-wait", capsys=capsys)
        assert run.code == 0, run.err
    status = cli("fleet", "status", str(root), "--kubeconfig", str(kc), "-o", "json", capsys=capsys)
    assert status.code == 0, status.err
    doc = json.loads(status.out)
    assert (doc["apiVersion"], doc["kind"]) == ("reconciler.dev/v1alpha1", "FleetStatus")
    # what docs/output.md tells scripts to test: a cluster that was read is Reachable
    assert {c["name"]: (c["reachable"], c["reason"]) for c in doc["clusters"]} == {
        "dev": (True, "Reachable"), "prod-eu": (True, "Reachable")}
    cells = {(c["name"], op["operator"]): op for c in doc["clusters"] for op in c["operators"]}
    assert cells[("dev", "plumbus")]["bundle"] == "plumbus.v1.0.0" and cells[("dev", "plumbus")]["inSync"]
    assert cells[("dev", "gadget")]["installed"] and not cells[("prod-eu", "gadget")]["placed"]
    assert any(s["line"].startswith("plumbus: 2/2 clusters at 1.0.0") for s in doc["summary"])

    page = cli("fleet", "status", str(root), "--kubeconfig", str(kc), "-o", "html", capsys=capsys)
    assert page.code == 0
    _check_page_in_a_browser(page.out, doc, root.parent / "fleet.html")

    prod.stop()
    try:
        down = cli("fleet", "status", str(root), "--kubeconfig", str(kc), "-o", "json", capsys=capsys)
        assert down.code == 3
        doc = json.loads(down.out)
        row = next(c for c in doc["clusters"] if c["name"] == "prod-eu")
        assert not row["reachable"] and row["reason"] == "ConnectionRefused", row
        assert row["message"] == f"cannot reach the API server at {prod.server}: nothing accepts connections there " \
                                 f"(is the cluster running?)"
        assert any("1 unreachable" in s["line"] for s in doc["summary"] if s["operator"] == "plumbus")
        table = cli("fleet", "status", str(root), "--kubeconfig", str(kc), capsys=capsys)
        assert "\nprod-eu  prod   unreachable: cannot reach the API server" in table.out, table.out
        refused = cli("promote", str(root), "--to", "prod", "--soak", "1h", "--kubeconfig", str(kc), capsys=capsys)
        assert refused.code == 2, refused.out   # dev is the evidence (not an hour old); prod being down is no bar
        assert "unreachable" not in refused.out
    finally:
        prod.start()


class _Cells(html.parser.HTMLParser):
    """The matrix's cells as the browser left them: (cluster, operator) -> data attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.cluster = ""
        self.cells: dict[tuple[str, str], dict[str, str]] = {}

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = dict(attrs)
        if tag == "tr" and "data-cluster" in a:
            self.cluster = a["data-cluster"]
        if tag == "td" and "data-operator" in a and a.get("data-placed") != "false":
            self.cells[(self.cluster, a["data-operator"])] = a


def _check_page_in_a_browser(page: str, doc: dict, path: Path) -> None:
    if not CHROMIUM.exists():
        not_tested("chromium", "Debian's chromium is not installed (`make tools` installs it as root)")
    assert "http://" not in page and "https://" not in page and "<script" not in page   # self-contained
    path.write_text(page)
    args = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            f"--user-data-dir={path.parent / 'chromium-profile'}"]
    dom = subprocess.run([*args, "--dump-dom", path.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0 and "<table id=\"matrix\">" in dom.stdout, dom.stderr[-2000:]
    shot = path.with_suffix(".png")
    subprocess.run([*args, f"--screenshot={shot}", "--window-size=1200,800", path.as_uri()], capture_output=True,
                   timeout=120, check=True)
    assert shot.stat().st_size > 5000   # something was drawn
    parsed = _Cells()
    parsed.feed(dom.stdout)
    expected = {(c["name"], op["operator"]): op for c in doc["clusters"] for op in c["operators"]
                if op["placed"] or op["installed"]}
    assert set(parsed.cells) == set(expected)
    for key, op in expected.items():
        cell = parsed.cells[key]
        assert (cell["data-bundle"], cell["data-health"], cell["data-in-sync"]) == (
            op["bundle"], op["health"], str(op["inSync"]).lower()), key

