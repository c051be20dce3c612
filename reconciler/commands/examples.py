"""The ``Examples:`` section of every command's help, in one place so they stay consistent.

Keys are the command path after ``reconciler``. ``reconciler.cli.parser`` puts each
above the command's exit codes; a test checks that every command has one.
"""

from __future__ import annotations

EXAMPLES: dict[str, str] = {
    "": """\
  reconciler reconcile . --dry-run            # what would change (exit 1 if anything)
  reconciler reconcile .                      # apply; exit 0 on success
  reconciler watch https://git.example.com/org/gitops.git --listen :8080
  source <(reconciler completion bash)        # tab completion""",
    "reconcile": """\
  # Preview against the current kubectl context; exit 1 when something would change
  reconciler reconcile . --dry-run
  # Apply with another context from a merged $KUBECONFIG
  KUBECONFIG=~/.kube/config:~/.kube/staging reconciler reconcile . --context staging
  # In CI: refuse a stale olm.lock, and save the change set for later steps
  reconciler reconcile . --locked -o json > result.json
  # Tell a no-op from a change in a script (exit 1 when something was applied)
  reconciler reconcile . --exit-code || [ $? -eq 1 ]""",
    "resolve": """\
  reconciler resolve .                        # choose bundles and write olm.lock
  reconciler resolve . --explain --no-write   # why each bundle, without writing
  reconciler resolve . --offline -o json      # ignore the cluster; machine-readable
  reconciler resolve . --cluster prod-eu      # in a fleet repository: one cluster (without: all of them)""",
    "adopt": """\
  reconciler adopt . --dry-run                # what OLM v0 and v1 run, as the files adopt would write
  reconciler adopt . --import-catalogs        # import the CatalogSources' catalogs first, then adopt
  reconciler adopt . && git add -A && git commit -m "Adopt what OLM v0 runs"
  reconciler reconcile . --dry-run            # then: each takeover step before it happens
  reconciler adopt . --operator plumbus       # applied without OLM: each object of its bundle against what runs""",
    "handback": """\
  reconciler handback . --operator plumbus --dry-run   # can OLM v0 take it back as it runs? what the reconcile does
  reconciler handback . --operator plumbus && git commit -qam "Hand plumbus back to OLM v0"
  reconciler reconcile .                      # OLM installs it over what runs; the reconciler lets go
  git rm operators/plumbus.yaml && git commit -qm "plumbus is OLM's"   # then nothing is pruned""",
    "approve": """\
  reconciler approve . plumbus                # approve what plumbus waits for, then commit:
  git add approvals/ && git commit -m "Approve plumbus.v1.1.0"
  reconciler approve . --all --offline        # everything that waits, without reading a cluster
  reconciler approve . fleeb --waive no-cluster-admin-binding   # a reviewed exception to a guardrail""",
    "diff": """\
  reconciler diff .                           # this commit against its parent (or uncommitted changes)
  reconciler diff . --base origin/main -o markdown > report.md   # a pull request's review comment
  reconciler diff . --base main -o json       # for scripts; exit 1 when something changes""",
    "update": """\
  reconciler update .                         # updates within each declaration's channel and range
  reconciler update . --include-out-of-range  # and beyond: other channels, catalogs, ranges
  reconciler update . --apply --allow minor   # a branch per Operator: reconciler/NAME-VERSION
  reconciler update . --apply --branch reconciler/updates   # every update on one branch""",
    "status": """\
  reconciler status                           # every Operator in the cluster: bundle, health, approval
  reconciler status -n plumbus-system         # only those installed in one namespace
  reconciler status .                         # also compare with the repository's olm.lock
  reconciler status . -o json                 # for scripts""",
    "watch": """\
  # A working tree kept applied, with endpoints on :8080
  reconciler watch ./gitops --listen :8080
  # A remote branch over HTTPS with a token, a signed push hook and leader election
  reconciler watch https://git.example.com/org/gitops.git --branch main \\
      --git-username bot --git-token-file /secrets/token \\
      --listen :8080 --hook-secret-file /secrets/hook --leader-elect -n reconciler-system
  # JSON logs for a log collector
  reconciler watch ./gitops --log-format json --log-level info""",
    "promote": """\
  reconciler promote . --to staging --dry-run          # the evidence from dev, and what would change
  reconciler promote . --to prod --soak 24h            # prod gets what staging ran healthy for a day; commits
  reconciler promote . --to prod --force --reason "CVE-2026-1234 hotfix"   # override, recorded in the commit
  reconciler promote . --all --soak 24h --branch promote/nightly   # a scheduled job: what is ready, as a PR""",
    "fleet": """\
  reconciler fleet status .                             # the cluster x Operator matrix, every context read
  reconciler fleet status . -o html > fleet.html        # one page to open in a browser""",
    "fleet status": """\
  reconciler fleet status . --kubeconfig ~/.kube/fleet   # a kubeconfig with a context per cluster
  reconciler fleet status . -o json | jq '.summary[].line'""",
    "cluster": """\
  reconciler cluster up && export KUBECONFIG=$(reconciler cluster kubeconfig)
  reconciler cluster down""",
    "cluster up": """\
  reconciler cluster up
  reconciler cluster up --name mine          # a private cluster, which another `cluster down` leaves alone
  reconciler cluster up --with-olm           # OLM v0 runs on it too (namespace olm)
  reconciler cluster up --with-olm --serve-catalog platform-repo/catalogs/community   # and serves OLM that catalog
  reconciler cluster up --name openshift --with-olm --openshift   # OLM laid out as OpenShift lays it out
  export KUBECONFIG=$(reconciler cluster kubeconfig)""",
    "cluster down": """\
  reconciler cluster down""",
    "cluster kubeconfig": """\
  kubectl --kubeconfig "$(reconciler cluster kubeconfig)" get namespaces""",
    "catalog": """\
  reconciler catalog validate catalogs/community
  reconciler catalog list bundles -c catalogs/community --package plumbus
  reconciler catalog graph plumbus -c catalogs/community --channel stable""",
    "catalog validate": """\
  reconciler catalog validate catalogs/community
  reconciler catalog validate catalogs/community -o json | jq '.findings[] | .message'""",
    "catalog list": """\
  reconciler catalog list packages -c catalogs/community
  reconciler catalog list channels -c catalogs/community --package plumbus
  reconciler catalog list bundles -c catalogs/community --provides Plumbus -o yaml""",
    "catalog graph": """\
  reconciler catalog graph plumbus -c catalogs/community                 # Mermaid, every channel
  reconciler catalog graph plumbus -c catalogs/community --channel stable --since 1.2.0 -f svg > plumbus.svg""",
    "catalog render": """\
  reconciler catalog render bundles/plumbus-v1.1.0 --image quay.io/org/plumbus-bundle:v1.1.0 -o yaml""",
    "catalog import": """\
  reconciler catalog import . --catalog-source openshift-marketplace/redhat-operators --pull-secret openshift-config/pull-secret
  reconciler catalog import . --image registry.example.com/index:v4.20 --name community --package plumbus
  reconciler catalog import . --catalog-source olm/community --dry-run     # what changed since the last import""",
    "catalog template": """\
  reconciler catalog template semver catalog-template.yaml > catalogs/community/plumbus/catalog.yaml
  cat basic.yaml | reconciler catalog template basic - -o json""",
    "bundle": """\
  reconciler bundle render bundles/plumbus-v1.1.0 -n plumbus-system
  reconciler bundle validate bundles/plumbus-v1.1.0""",
    "bundle render": """\
  reconciler bundle render bundles/plumbus-v1.1.0 -n plumbus-system
  reconciler bundle render quay.io/org/plumbus-bundle:v1.1.0 --watch-namespace team-a -o json""",
    "bundle validate": """\
  reconciler bundle validate bundles/plumbus-v1.1.0
  reconciler bundle validate bundles/plumbus-v1.1.0 -n team-a --watch-namespace team-a -o json | jq .valid""",
    "bundle build": """\
  reconciler bundle build bundles/plumbus-v1.1.0 --tag registry.example.com/org/plumbus-bundle:v1.1.0
  reconciler bundle build bundles/plumbus-v1.1.0 --tag plumbus:v1.1.0 --layout out/ --no-push""",
    "bundle convert": """\
  reconciler bundle convert bundles/plumbus-k8s --to registry+v1 -o out/plumbus-registry""",
    "completion": """\
  source <(reconciler completion bash)                         # bash, this shell
  reconciler completion bash > /etc/bash_completion.d/reconciler
  reconciler completion zsh > "${fpath[1]}/_reconciler"         # zsh
  reconciler completion fish > ~/.config/fish/completions/reconciler.fish""",
}
