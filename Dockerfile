# syntax=docker/dockerfile:1
# The reconciler as a container: multi-stage, non-root, no build tools at run time.

FROM python:3.11-slim AS build
WORKDIR /src
RUN python -m venv /opt/reconciler
COPY pyproject.toml README.md ./
COPY reconciler ./reconciler
RUN /opt/reconciler/bin/pip install --no-cache-dir --upgrade pip \
 && /opt/reconciler/bin/pip install --no-cache-dir .

FROM python:3.11-slim
RUN useradd --uid 65532 --user-group --no-create-home --shell /usr/sbin/nologin reconciler
COPY --from=build /opt/reconciler /opt/reconciler
COPY policies /etc/reconciler/policies
ENV PATH=/opt/reconciler/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 65532:65532
WORKDIR /repo
ENTRYPOINT ["reconciler"]
CMD ["--help"]
