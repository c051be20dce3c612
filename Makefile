# Two entry points for a fresh machine (see README.md):
#   make demo   reconcile examples/gitops-repo against a local kube-apiserver
#   make test   run the whole test suite
# Both create the virtualenv and build the pinned control-plane binaries
# (cached outside the repository) when they are missing.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test install binaries clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

binaries: $(STAMP)
	$(BIN)/python -c 'from reconciler.cluster.controlplane import ensure_binaries; ensure_binaries()'

demo: binaries
	$(BIN)/reconciler cluster up
	$(BIN)/reconciler reconcile examples/gitops-repo --kubeconfig "$$($(BIN)/reconciler cluster kubeconfig)"; \
	  rc=$$?; [ $$rc -le 1 ] || exit $$rc
	@echo
	@echo "The local cluster keeps running: export KUBECONFIG=$$($(BIN)/reconciler cluster kubeconfig)"
	@echo "Stop it with: $(BIN)/reconciler cluster down"

test: binaries
	$(BIN)/python -m pytest

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache
