"""The image, built and run for real: read-only root, a data volume, signed webhooks, SIGTERM.

Needs a Docker engine: ``JOBHOOK_DOCKER_UP`` names a program that starts one and prints the tag
of the base image to build on (CI points it at its helper); without it, a running engine and the
default base image are used. Skips with the reason when neither is usable, unless
JOBHOOK_REQUIRE_SERVICES=1.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import httpx
import pytest

from tests.support import FIXTURES, SECRET, reducto_body, signed_headers

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

# The first run on a fresh machine installs Docker and builds the base and the image.
pytestmark = [pytest.mark.container, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[2]
IMAGE = "jobhook:test"
UID = "10001"
API_KEY = "reducto-test-key"
STOP_TIMEOUT = 30


def _unusable(reason: str) -> NoReturn:
    if os.environ.get("JOBHOOK_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{reason} (JOBHOOK_REQUIRE_SERVICES=1: the container test must run)")
    pytest.skip(reason)


def docker(*args: str, timeout: float = 120, env: dict[str, str] | None = None) -> str:
    """Run ``docker ARGS`` and return its stdout; a failure shows docker's own error."""
    proc = subprocess.run(
        ["docker", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=None if env is None else {**os.environ, **env},
        check=False,
    )
    if proc.returncode != 0:
        raise AssertionError(f"docker {' '.join(args[:2])} failed: {proc.stderr.strip()}")
    return proc.stdout.strip()


def _base_image() -> str | None:
    """The base image tag JOBHOOK_DOCKER_UP prints, or None to build on the Dockerfile's default."""
    helper = os.environ.get("JOBHOOK_DOCKER_UP")
    if not helper:
        try:
            subprocess.run(["docker", "info"], capture_output=True, timeout=30, check=True)
        except (OSError, subprocess.SubprocessError):
            _unusable(
                "no Docker engine is running and JOBHOOK_DOCKER_UP names no program to start one"
            )
        default = "python:3.11-slim"
        have = subprocess.run(["docker", "image", "inspect", default], capture_output=True)
        if have.returncode != 0:
            pulled = subprocess.run(
                ["docker", "pull", default], capture_output=True, text=True, timeout=300
            )
            if pulled.returncode != 0:
                _unusable(f"the base image {default} cannot be pulled: {pulled.stderr.strip()}")
        return None
    try:
        up = subprocess.run([helper], capture_output=True, text=True, timeout=420, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        _unusable(f"JOBHOOK_DOCKER_UP={helper} could not run: {exc}")
    if up.returncode != 0 or not up.stdout.strip():
        _unusable(f"JOBHOOK_DOCKER_UP={helper} failed: {up.stderr.strip()[-500:]}")
    return up.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The project's image, built on docker-up's stand-in base (layers cached between runs)."""
    base = _base_image()
    log = tmp_path_factory.mktemp("build") / "build.log"
    with log.open("w") as fh:
        build = subprocess.run(
            [
                "docker",
                "build",
                *([] if base is None else ["--build-arg", f"PYTHON_IMAGE={base}"]),
                "-t",
                IMAGE,
                str(REPO),
            ],
            stdout=fh,
            stderr=subprocess.STDOUT,
            timeout=420,
            check=False,
        )
    if build.returncode != 0:
        pytest.fail(f"docker build failed:\n{log.read_text()[-3000:]}")
    return IMAGE


@pytest.fixture(scope="module")
def network() -> Iterator[str]:
    """A bridge network of the test's own; its gateway is this machine, seen from containers."""
    name = f"jobhook-test-{uuid.uuid4().hex[:8]}"
    docker("network", "create", name)
    try:
        yield name
    finally:
        docker("network", "rm", name)


class _JobApi(ThreadingHTTPServer):
    requests: list[tuple[str, str | None]]


class _ReductoJobs(BaseHTTPRequestHandler):
    """Reducto's ``GET /job/{id}`` for a completed job with its result inline."""

    server: _JobApi

    def do_GET(self) -> None:
        self.server.requests.append((self.path, self.headers.get("Authorization")))
        if self.headers.get("Authorization") != f"Bearer {API_KEY}":
            self._reply(401, {"detail": "Unauthorized"})
        elif not self.path.startswith("/job/"):
            self._reply(404, {"detail": "Not Found"})
        else:
            completed = json.loads((FIXTURES / "providers" / "reducto.json").read_text())
            answer = completed["job_completed_full"]
            answer["result"]["job_id"] = self.path.removeprefix("/job/")
            self._reply(200, answer)

    def _reply(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the test reads ``server.requests`` instead."""


@pytest.fixture(scope="module")
def job_api(image: str, network: str) -> Iterator[_JobApi]:
    """A fake Reducto job API on the test network's gateway, reachable only from containers."""
    gateway = docker(
        "network", "inspect", network, "--format", "{{(index .IPAM.Config 0).Gateway}}"
    )
    server = _JobApi((gateway, 0), _ReductoJobs)
    server.requests = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture(scope="module")
def config_file(tmp_path_factory: pytest.TempPathFactory, job_api: _JobApi) -> Path:
    host, port = job_api.server_address[:2]
    path = tmp_path_factory.mktemp("config") / "jobhook.toml"
    path.write_text(
        f"""
[sources.reducto]
provider = "reducto"
secrets = ["env:REDUCTO_WEBHOOK_SECRET"]
api_base_url = "http://{host!s}:{port}"
api_key = "env:REDUCTO_API_KEY"

# The fake job API lives on the docker bridge, over plain http.
[results]
allowed_hosts = ["{host!s}"]
allow_http = true
allow_private_networks = true

[[handlers]]
name = "archive"
type = "file"
dir = "/data/out"
""",
        encoding="utf-8",
    )
    path.chmod(0o644)
    return path


@dataclass
class Container:
    name: str

    @property
    def url(self) -> str:
        # Read every time: a restart may publish the port on another host port.
        address = docker("port", self.name, "8000/tcp").splitlines()[0]
        return f"http://{address}"

    def state(self, template: str) -> str:
        return docker("inspect", "--format", template, self.name)

    def logs(self) -> str:
        proc = subprocess.run(
            ["docker", "logs", self.name], capture_output=True, text=True, timeout=30, check=False
        )
        return proc.stdout + proc.stderr

    def read(self, path: str) -> bytes | None:
        """A file inside the running container, or None when it is not there (yet)."""
        proc = subprocess.run(
            ["docker", "exec", self.name, "cat", path], capture_output=True, timeout=30, check=False
        )
        return proc.stdout if proc.returncode == 0 else None

    def wait_serving(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.state("{{.State.Running}}") != "true":
                pytest.fail(f"{self.name} exited while starting:\n{self.logs()[-3000:]}")
            with contextlib.suppress(httpx.HTTPError, AssertionError, IndexError):
                if httpx.get(f"{self.url}/healthz", timeout=2, trust_env=False).is_success:
                    return
            time.sleep(0.2)
        pytest.fail(f"{self.name} did not answer /healthz in {timeout}s:\n{self.logs()[-3000:]}")

    def send(self, body: bytes, msg_id: str) -> httpx.Response:
        return httpx.post(
            f"{self.url}/webhooks/reducto",
            content=body,
            timeout=10,
            headers=signed_headers(body, msg_id=msg_id),
            trust_env=False,
        )


@pytest.fixture
def run_container(image: str, network: str) -> Iterator[Callable[..., Container]]:
    """Start the image as an operator would: read-only root, /tmp tmpfs, a named data volume."""
    names: list[str] = []

    def start(*, config: Path | None, env: dict[str, str] | None = None) -> Container:
        name = f"jobhook-test-{uuid.uuid4().hex[:8]}"
        names.append(name)
        if env is None:
            env = {"REDUCTO_WEBHOOK_SECRET": SECRET, "REDUCTO_API_KEY": API_KEY}
        args = [
            "run",
            "--detach",
            "--name",
            name,
            "--network",
            network,
            "--read-only",
            "--tmpfs",
            "/tmp",
            "--volume",
            f"{name}:/data",
            "--publish",
            "127.0.0.1::8000",
            "--health-interval",
            "1s",
        ]
        for key in env:  # by name only: values come from docker's environment, not argv
            args += ["--env", key]
        if config is not None:
            args += ["--volume", f"{config}:/etc/jobhook/jobhook.toml:ro"]
        args += [image, "serve"]
        if config is not None:
            args += ["--config", "/etc/jobhook/jobhook.toml"]
        docker(*args, env=env)
        container = Container(name)
        container.wait_serving()
        return container

    yield start
    for name in names:
        subprocess.run(
            ["docker", "rm", "--force", "--volumes", name],
            capture_output=True,
            timeout=60,
            check=False,
        )
        subprocess.run(
            ["docker", "volume", "rm", name], capture_output=True, timeout=60, check=False
        )


def test_service_runs_as_the_non_root_image_user(
    run_container: Callable[..., Container], config_file: Path
) -> None:
    container = run_container(config=config_file)
    status = container.read("/proc/1/status")
    assert status is not None
    uids = next(line for line in status.decode().splitlines() if line.startswith("Uid:"))
    assert uids.split()[1:] == [UID] * 4
    assert container.state("{{.Config.User}}") == f"{UID}:{UID}"


def test_healthcheck_reports_healthy(
    run_container: Callable[..., Container], config_file: Path
) -> None:
    container = run_container(config=config_file)
    deadline = time.monotonic() + 30
    while (health := container.state("{{.State.Health.Status}}")) != "healthy":
        assert health == "starting", container.state("{{json .State.Health}}")
        assert time.monotonic() < deadline, "HEALTHCHECK never passed"
        time.sleep(0.5)


def test_signed_webhook_is_accepted_once_then_reported_duplicate(
    run_container: Callable[..., Container], config_file: Path
) -> None:
    container = run_container(config=config_file)
    body = reducto_body("job-dup")
    first = container.send(body, "msg_dup")
    again = container.send(body, "msg_dup")
    assert (first.status_code, first.json()["status"]) == (200, "accepted")
    assert (again.status_code, again.json()["status"]) == (200, "duplicate")


def test_completion_lands_on_the_data_volume(
    run_container: Callable[..., Container], config_file: Path, job_api: _JobApi
) -> None:
    container = run_container(config=config_file)
    response = container.send(reducto_body("job-file", team="docs"), "msg_file")
    assert response.json()["status"] == "accepted"
    deadline = time.monotonic() + 30
    while (document := container.read("/data/out/reducto/job-file.json")) is None:
        if time.monotonic() > deadline:
            pytest.fail(
                "no /data/out/reducto/job-file.json after 30s; job API calls: "
                f"{job_api.requests}\n{container.logs()[-3000:]}"
            )
        time.sleep(0.3)
    completion = json.loads(document)
    assert completion["source"] == "reducto"
    assert completion["job_id"] == "job-file"
    assert (completion["state"], completion["provider_status"]) == ("succeeded", "Completed")
    assert completion["metadata"] == {"team": "docs"}
    assert ("/job/job-file", f"Bearer {API_KEY}") in job_api.requests
    result = container.read("/data/out/reducto/job-file.result")
    assert result is not None
    assert completion["result"] == {
        "sha256": hashlib.sha256(result).hexdigest(),
        "bytes": len(result),
    }
    assert b"Invoice 1042" in result


def test_dedupe_state_survives_a_restart(
    run_container: Callable[..., Container], config_file: Path
) -> None:
    container = run_container(config=config_file)
    body = reducto_body("job-restart")
    assert container.send(body, "msg_restart").json()["status"] == "accepted"
    docker("restart", "--time", str(STOP_TIMEOUT), container.name, timeout=STOP_TIMEOUT + 30)
    container.wait_serving()
    assert container.send(body, "msg_restart").json()["status"] == "duplicate"


def test_docker_stop_shuts_down_gracefully_with_exit_code_0(
    run_container: Callable[..., Container], config_file: Path
) -> None:
    container = run_container(config=config_file)
    started = time.monotonic()
    docker("stop", "--time", str(STOP_TIMEOUT), container.name, timeout=STOP_TIMEOUT + 30)
    elapsed = time.monotonic() - started
    assert container.state("{{.State.ExitCode}}") == "0", container.logs()[-3000:]
    assert elapsed < STOP_TIMEOUT / 3, f"SIGTERM took {elapsed:.1f}s: was it ignored?"
    events = [
        json.loads(line).get("event")
        for line in container.logs().splitlines()
        if line.startswith("{")
    ]
    assert "stopped" in events  # the lifespan closed the store


def test_environment_alone_configures_a_source(run_container: Callable[..., Container]) -> None:
    container = run_container(
        config=None,
        env={
            "JOBHOOK_SOURCES__REDUCTO__PROVIDER": "reducto",
            "JOBHOOK_SOURCES__REDUCTO__SECRETS": '["env:WEBHOOK_SECRET"]',
            "WEBHOOK_SECRET": SECRET,
        },
    )
    response = container.send(reducto_body("job-env"), "msg_env")
    assert response.json()["status"] == "accepted"
    assert container.read("/data/jobhook.db") is not None
