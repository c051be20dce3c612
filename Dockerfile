# syntax=docker/dockerfile:1
# The reconciler as a container image: multi-stage (no build files at run time), non-root
# (uid 65532), slim. libgit2 comes inside the pygit2 wheel, so no git is installed.
# Runs with a read-only root filesystem: give it writable /tmp and --cache-dir volumes
# (deploy/ does).
#
# Any base with python3 (3.11+) and its venv module works: python:3.11-slim-bookworm, or the
# Debian base that image/build assembles from Debian's packages and builds on with buildah
# (what CI does, without Docker Hub):
#
#   docker build -t reconciler:0.1.0 .
#   image/build localhost/reconciler:0.1.0
#   docker run --rm reconciler:0.1.0 watch --help

ARG PYTHON=python:3.11-slim-bookworm

FROM ${PYTHON} AS build
# PIP_CERT: a CA bundle mounted for this stage only, where a proxy re-signs TLS (image/build passes
# the host's); nothing of it reaches the final image.
ARG PIP_CERT=
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md requirements.lock ./
COPY reconciler ./reconciler
# Exactly the hash-checked versions of requirements.lock (compiled for CPython 3.11), then the project
# itself built with the locked setuptools.
RUN if [ -n "$PIP_CERT" ]; then export PIP_CERT; else unset PIP_CERT; fi \
 && python3 -m venv /opt/reconciler \
 && /opt/reconciler/bin/pip install --quiet --require-hashes --no-deps -r requirements.lock \
 && /opt/reconciler/bin/pip install --quiet --no-deps --no-build-isolation . \
 && /opt/reconciler/bin/pip uninstall --quiet --yes setuptools wheel \
 && /opt/reconciler/bin/pip uninstall --quiet --yes pip \
 && find /opt/reconciler -name '__pycache__' -prune -exec rm -rf {} + \
 && /opt/reconciler/bin/python -c "import pygit2, watchdog, prometheus_client, reconciler.cli.parser"

FROM ${PYTHON}
RUN groupadd --gid 65532 reconciler \
 && useradd --uid 65532 --gid 65532 --home-dir /home/reconciler --create-home --shell /usr/sbin/nologin reconciler \
 && install -d -o 65532 -g 65532 /var/cache/reconciler /repo
COPY --from=build /opt/reconciler /opt/reconciler
COPY policies /etc/reconciler/policies
ENV PATH=/opt/reconciler/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    XDG_CACHE_HOME=/var/cache
USER 65532:65532
WORKDIR /repo
EXPOSE 8080
ENTRYPOINT ["reconciler"]
CMD ["--help"]
