# Two entry points for a fresh machine (see README.md):
#   make demo   reconcile examples/gitops-repo against a local kube-apiserver
#   make test   run the whole test suite
#   make image  build the container image (buildah on a Debian base, see image/build)
# Both create the virtualenv and build the pinned control-plane binaries
# (cached outside the repository) when they are missing; make test also installs
# the image builder (buildah, mmdebstrap) with apt-get when run as root, so the
# image test runs on a fresh machine (it skips, saying why, where they cannot be had).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test install binaries image image-tools clean

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

image-tools:
	@if ! command -v buildah >/dev/null || ! command -v mmdebstrap >/dev/null; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq buildah mmdebstrap >/dev/null) \
	      || echo "image-tools: could not install buildah and mmdebstrap; the image test will skip"; \
	  else echo "image-tools: buildah/mmdebstrap missing and not root: the image test will skip"; fi; \
	fi

image: image-tools
	image/build localhost/reconciler:dev

test: binaries image-tools
	$(BIN)/python -m pytest

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache
