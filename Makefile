# Two entry points for a fresh machine (see README.md):
#   make demo   the README's walk-through on a copy of examples/gitops-repo, against a local kube-apiserver
#   make test   run the whole test suite
#   make image  build the container image (buildah on a Debian base, see image/build)
#   make lock   refresh requirements*.lock to the newest versions pyproject.toml allows
# Both create the virtualenv and build the pinned control-plane binaries
# (cached outside the repository) when they are missing. `make test` also
# builds the pinned peers the parity tests compare against (opm, the OCI
# registries (distribution, and go-containerregistry's with the referrers API), crane, operator-controller's renderer,
# cosign v3 and v2), OLM v0 for the tests that run it, and, as root on Debian,
# installs Graphviz, OpenSSH's server, gpg and Chromium with apt-get when missing, so that no test is skipped for want of
# a tool (only the corpus tests skip, when ../shared/corpus is absent).
# It also installs the image builder (buildah, mmdebstrap) with apt-get when run as
# root, so the image test runs on a fresh machine (it skips, saying why, where they cannot be had).
# Every run ends listing the parts it did not test (each a marker of pyproject.toml), how many tests and why.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test install lock binaries peers olm olmv1 tools image image-tools clean

# The virtualenv holds exactly the hash-checked versions of requirements-test.lock (and the project,
# editable, built with the locked setuptools): a new machine on any day installs what CI last passed with.
# pyproject.toml keeps the ranges users of the package install from; `make lock` refreshes both lock
# files to the newest versions those ranges allow (tests/unit/project/test_requirements_lock.py checks they agree).
$(STAMP): pyproject.toml requirements-test.lock
	rm -rf $(VENV)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check --require-hashes --no-deps -r requirements-test.lock
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $(STAMP)

install: $(STAMP)

# requirements.lock: what the package needs to run (the image installs it); requirements-test.lock: that
# plus the test tools, at the same versions (the second compile keeps the first one's pins).
PIP_TOOLS := pip-tools==7.6.2
LOCK_FLAGS := --quiet --generate-hashes --allow-unsafe --strip-extras --all-build-deps \
              --no-emit-index-url --no-emit-find-links
lock:
	rm -rf .venv-lock
	$(PYTHON) -m venv .venv-lock
	.venv-lock/bin/pip install --quiet --disable-pip-version-check $(PIP_TOOLS)
	.venv-lock/bin/pip-compile $(LOCK_FLAGS) --upgrade --extra test --output-file requirements-test.lock pyproject.toml
	cp requirements-test.lock requirements.lock
	.venv-lock/bin/pip-compile $(LOCK_FLAGS) --output-file requirements.lock pyproject.toml
	rm -rf .venv-lock

binaries: $(STAMP)
	$(BIN)/python -c 'from reconciler.localcluster import ensure_binaries; ensure_binaries()'

# The README's walk-through against the local cluster, on a copy of the example (which ships unapproved): the
# first install waits for approval (exit 4), `reconciler approve` is committed, and the next reconcile applies it.
# Each checkout has its own copy and its own local cluster, named after the checkout's path (a checksum of it), so
# two checkouts on one machine never share them; a second `make demo` of one checkout reuses its cluster (`cluster
# up` says so) and replaces its copy, saying so too.
CHECKOUT_ID := $(shell printf '%s' "$(CURDIR)" | cksum | cut -d' ' -f1)
DEMO_CLUSTER ?= demo-$(CHECKOUT_ID)
DEMO ?= $(or $(TMPDIR),/tmp)/reconciler-demo-$(CHECKOUT_ID)
DEMO_GIT = git -C $(DEMO) -c user.name=demo -c user.email=demo@example.invalid
DEMO_KUBECONFIG = "$$($(BIN)/reconciler cluster kubeconfig --name $(DEMO_CLUSTER))"

demo: binaries
	@echo "make demo of $(CURDIR): local cluster $(DEMO_CLUSTER), repository copy $(DEMO)"
	$(BIN)/reconciler cluster up --name $(DEMO_CLUSTER)
	@if [ -e $(DEMO) ]; then echo "replacing the copy an earlier make demo of this checkout left in $(DEMO)"; fi
	rm -rf $(DEMO) && cp -r examples/gitops-repo $(DEMO)
	git init -q $(DEMO) && $(DEMO_GIT) add -A && $(DEMO_GIT) commit -qm "Install plumbus"
	$(BIN)/reconciler reconcile $(DEMO) --kubeconfig $(DEMO_KUBECONFIG); \
	  rc=$$?; [ $$rc -eq 4 ] || exit $$rc
	$(BIN)/reconciler approve $(DEMO) plumbus --offline
	$(DEMO_GIT) add approvals && $(DEMO_GIT) commit -qm "Approve plumbus"
	$(BIN)/reconciler reconcile $(DEMO) --kubeconfig $(DEMO_KUBECONFIG); \
	  rc=$$?; [ $$rc -le 1 ] || exit $$rc
	@echo
	@echo "The local cluster $(DEMO_CLUSTER) (this checkout's) keeps running: export KUBECONFIG=$(DEMO_KUBECONFIG)"
	@echo "Stop it with: $(BIN)/reconciler cluster down --name $(DEMO_CLUSTER)"

# Built before pytest collects anything: a test module looks for opm when it is imported.
peers: $(STAMP)
	$(BIN)/python -c 'from bench.peers import opm, registry, crane, operator_controller, cosign, cosign_v2, ggcrregistry; opm.opm_binary(); registry.registry_binary(); crane.crane_binary(); operator_controller.ocrender_binary(); cosign.cosign_binary(); cosign_v2.cosign_v2_binary(); ggcrregistry.ggcrregistry_binary()'

# OLM v0 (olm-operator and catalog-operator, pinned by reconciler/localcluster/olm/go.mod), which tests/olm runs
# on a control plane of its own; a cold build takes about ten minutes on two cores, so it happens here, with progress.
olm: $(STAMP)
	$(BIN)/python -c 'from reconciler.localcluster.olmv0 import ensure_olm; ensure_olm()'

# OLM v1 (catalogd and operator-controller, pinned by reconciler/localcluster/olmv1/go.mod), which tests/olmv1 runs
# beside a control plane of its own (built by the test when missing). It needs pkg.package-operator.run/boxcutter
# from the Go module proxy, which some restricted proxies refuse (403): then its build fails, saying so.
olmv1: $(STAMP)
	$(BIN)/python -c 'from reconciler.localcluster.olmv1 import ensure_olmv1; ensure_olmv1()'

# Graphviz (`catalog graph --format svg`), sshd (git over SSH), gpg and ssh-keygen (signed commits) and Chromium for
# the tests that use them.
# Chromium (headless) renders the page `fleet status -o html` writes, in its test.
TOOL_PACKAGES := $(if $(shell command -v dot),,graphviz) $(if $(wildcard /usr/sbin/sshd),,openssh-server) \
                 $(if $(shell command -v ssh-keygen),,openssh-client) $(if $(wildcard /usr/bin/chromium),,chromium) \
                 $(if $(shell command -v gpg),,gpg)
tools:
	@if [ -n "$(strip $(TOOL_PACKAGES))" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(TOOL_PACKAGES); \
	  else \
	    echo "missing: $(TOOL_PACKAGES); install them (the tests that need them are skipped otherwise)"; \
	  fi; \
	fi

image-tools:
	@if ! command -v buildah >/dev/null || ! command -v mmdebstrap >/dev/null; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq buildah mmdebstrap >/dev/null) \
	      || echo "image-tools: could not install buildah and mmdebstrap; the image test will skip"; \
	  else echo "image-tools: buildah/mmdebstrap missing and not root: the image test will skip"; fi; \
	fi

image: image-tools
	image/build localhost/reconciler:dev

test: binaries peers olm tools image-tools
	$(BIN)/python -m pytest

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache
