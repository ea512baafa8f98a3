# jobhook: the webhook receiver as a container image.
#
#   docker build -t jobhook .                                   # on python:3.11-slim
#   docker build --build-arg PYTHON_IMAGE=mirror/python:3.11 .  # on any image with python3 in /usr/local/bin
#
# The image listens on 0.0.0.0:8000, keeps its state in the /data volume, runs as uid 10001 and
# works with a read-only root filesystem (only /data and /tmp are written).
ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS build
ARG UV_VERSION=0.13.8
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore \
    UV_PROJECT_ENVIRONMENT=/opt/jobhook \
    UV_PYTHON=/usr/local/bin/python3 \
    UV_PYTHON_DOWNLOADS=never \
    UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_NO_CACHE=1
RUN pip install --no-cache-dir "uv==${UV_VERSION}"
WORKDIR /src
# Dependencies get their own layer, rebuilt only when pyproject.toml (and so a pin) changes.
# Every version is fixed by [tool.uv] constraint-dependencies; the lock made here stays here.
COPY pyproject.toml ./
RUN uv sync --no-install-project --no-dev --all-extras
COPY README.md ./
COPY receiver ./receiver
COPY handlers ./handlers
# --locked: the project goes in with exactly the versions resolved above; --no-editable: as a
# wheel, so the runtime stage needs nothing from /src.
RUN uv sync --locked --no-dev --all-extras --no-editable

FROM ${PYTHON_IMAGE}
RUN groupadd --gid 10001 jobhook \
 && useradd --no-log-init --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin jobhook \
 && mkdir /data \
 && chown 10001:10001 /data
COPY --from=build /opt/jobhook /opt/jobhook
# The environment beats the config file (see docs/deployment.md, "Container"): these make the container's
# contract hold whatever a mounted config says; override them with `docker run -e`.
# WORKDIR / makes relative paths in a config (e.g. dir = "data/out") land in /data too.
ENV PATH=/opt/jobhook/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    JOBHOOK_DATA_DIR=/data \
    JOBHOOK_SERVER__HOST=0.0.0.0 \
    JOBHOOK_SERVER__PORT=8000
WORKDIR /
VOLUME ["/data"]
USER 10001:10001
EXPOSE 8000
# uvicorn handles SIGTERM itself (graceful shutdown, exit 0), so no init process is needed.
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=30s --timeout=5s --start-period=15s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('JOBHOOK_SERVER__PORT', '8000'), timeout=4)"]
ENTRYPOINT ["jobhook"]
CMD ["serve"]
