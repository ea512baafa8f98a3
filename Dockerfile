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
    VIRTUAL_ENV=/opt/jobhook \
    UV_PYTHON_DOWNLOADS=never \
    UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_NO_CACHE=1
# uv pip installs into $VIRTUAL_ENV, the environment the runtime stage copies. binutils (strip,
# below) stays in this stage; its version is whatever the base's Debian release has.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends binutils \
 && rm -rf /var/lib/apt/lists/* \
 && pip install --no-cache-dir "uv==${UV_VERSION}" \
 && uv venv --python /usr/local/bin/python3 /opt/jobhook
WORKDIR /src
# Dependencies get their own layer, rebuilt only when requirements/runtime.txt changes: the
# service and all its extras at the versions pyproject's constraints pin (scripts/lock writes
# the file), each file checked against its sha256. Nothing is resolved here: --no-deps.
COPY requirements/runtime.txt requirements/
# The wheels' extension modules carry their debug information (most of uvloop's 13.6 MB, a
# fifth of the environment), which nothing reads at run time: --strip-debug keeps the symbols.
RUN uv pip install --require-hashes --no-deps -r requirements/runtime.txt \
 && find /opt/jobhook -name '*.so' -exec strip --strip-debug {} +
COPY pyproject.toml README.md ./
COPY receiver ./receiver
COPY handlers ./handlers
COPY jobhook ./jobhook
# The project itself, as a wheel (the runtime stage needs nothing from /src) and without its
# dependencies, which are all in already; uv pip check fails the build if one were missing.
RUN uv pip install --no-deps --no-editable . \
 && uv pip check

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
