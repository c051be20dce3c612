# syntax=docker/dockerfile:1
# The reconciler as a container image: multi-stage (no compilers or build files at run time),
# non-root (uid 65532), slim. libgit2 comes inside the pygit2 wheel, so no git is installed.
# Runs with a read-only root filesystem: give it writable /tmp and --cache-dir volumes
# (deploy/ does).
#
#   docker build -t reconciler:0.1.0 .
#   docker run --rm reconciler:0.1.0 watch --help

ARG PYTHON=python:3.11-slim-bookworm

FROM ${PYTHON} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY reconciler ./reconciler
RUN python -m pip wheel --wheel-dir /wheels . \
 && python -m venv /opt/reconciler \
 && /opt/reconciler/bin/pip install --no-index --find-links /wheels reconciler \
 && /opt/reconciler/bin/pip uninstall --yes pip \
 && find /opt/reconciler -name '__pycache__' -prune -exec rm -rf {} + \
 && /opt/reconciler/bin/python -c "import pygit2, watchdog, prometheus_client, reconciler.cli"

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
