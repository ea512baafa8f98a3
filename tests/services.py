"""The machine's real servers (PostgreSQL, Redis, NATS, RabbitMQ): skip without them, or fail.

Tests that need one call ``require_service`` first. On a machine without the server they skip
with the reason; under ``JOBHOOK_REQUIRE_SERVICES=1`` (set by ``.ci/run``) they fail instead,
so CI cannot pass by skipping them. ``stopped`` takes a broker down for a block and always
starts it again, with the commands this machine's services were started with.
``handler_app`` / ``send_webhook`` / ``wait_for_dispatch`` run the real app with one handler
in front of them: a signed Reducto webhook in, the dispatcher's retries out.
``postgres_database`` makes a fresh PostgreSQL database for one test and drops it afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import shutil
import signal
import socket
import time
import uuid
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest

from tests.support import SECRET, reducto_body, signed_headers

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable
    from pathlib import Path

    from starlette.applications import Starlette

    from receiver.store import DispatchRow

HOST = "127.0.0.1"
PORTS = {"redis": 6379, "nats": 4222, "rabbitmq": 5672}
POSTGRES_ADMIN_URL = os.environ.get(
    "JOBHOOK_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
"""Where test databases are created (and dropped): any database of a role that may create them."""
REDIS_START = (
    "redis-server", "--daemonize", "yes", "--bind", "127.0.0.1", "-::1", "--port", "6379",
    "--save", "", "--appendonly", "no", "--dir", "/var/lib/redis",
    "--logfile", "/var/log/redis/ci.log",
)  # fmt: skip
NATS_START = (
    "start-stop-daemon", "--start", "--oknodo", "--background", "--exec", "/usr/sbin/nats-server",
    "--", "-a", "127.0.0.1", "-p", "4222", "-js", "-sd", "/var/lib/nats-server",
    "-l", "/var/log/nats-server.log",
)  # fmt: skip
TOOLS = {
    "redis": ("redis-cli", "redis-server"),
    "nats": ("pgrep", "start-stop-daemon", "/usr/sbin/nats-server"),
    "rabbitmq": ("rabbitmqctl",),
}


def services_required() -> bool:
    """True when backend tests must run (``JOBHOOK_REQUIRE_SERVICES=1``), not skip."""
    return os.environ.get("JOBHOOK_REQUIRE_SERVICES") == "1"


def _unavailable(reason: str) -> None:
    if services_required():
        pytest.fail(f"{reason}; JOBHOOK_REQUIRE_SERVICES=1 makes this test mandatory")
    pytest.skip(reason)


def require_service(name: str, host: str, port: int) -> None:
    """Skip (or fail, when services are required) unless ``host:port`` accepts a TCP connection."""
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return
    except OSError as exc:
        reason = f"{name} not reachable on {host}:{port} ({exc.strerror or exc})"
    _unavailable(reason)


def require_module(name: str, extra: str) -> Any:
    """Import ``name`` from an optional extra; without it the test module skips (or fails)."""
    try:
        return importlib.import_module(name)
    except ImportError:
        reason = f"{name} is not installed: uv sync --extra {extra}"
    if services_required():
        pytest.fail(f"{reason}; JOBHOOK_REQUIRE_SERVICES=1 makes these tests mandatory")
    pytest.skip(reason, allow_module_level=True)


def _listening(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=0.5):
            return True
    except OSError:
        return False


async def _wait_port(port: int, *, up: bool, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while _listening(port) != up:
        if time.monotonic() > deadline:
            raise RuntimeError(f"port {port} still {'closed' if up else 'open'} after {timeout}s")
        await asyncio.sleep(0.05)


async def _run(*argv: str, timeout: float = 60.0) -> str:
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    async with asyncio.timeout(timeout):
        out, _ = await proc.communicate()
    text = out.decode(errors="replace")
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:2])} exited with {proc.returncode}: {text[-500:]}")
    return text


async def _stop_redis() -> None:
    await _run("redis-cli", "-h", HOST, "-p", "6379", "shutdown", "nosave")


async def _start_redis() -> None:
    await _run(*REDIS_START)


async def _stop_nats() -> None:
    out = await _run("pgrep", "-x", "nats-server")
    for pid in out.split():
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGTERM)


async def _start_nats() -> None:
    await _run(*NATS_START)


async def _stop_rabbitmq() -> None:
    await _run("rabbitmqctl", "stop_app")


async def _start_rabbitmq() -> None:
    await _run("rabbitmqctl", "start_app")


_CONTROL: dict[str, tuple[Callable[[], Awaitable[None]], Callable[[], Awaitable[None]]]] = {
    "redis": (_stop_redis, _start_redis),
    "nats": (_stop_nats, _start_nats),
    "rabbitmq": (_stop_rabbitmq, _start_rabbitmq),
}


@contextlib.asynccontextmanager
async def stopped(server: str) -> AsyncIterator[None]:
    """``server`` (redis, nats, rabbitmq) is down for the block, and up again however it ends."""
    missing = [tool for tool in TOOLS[server] if shutil.which(tool) is None]
    if missing:
        _unavailable(f"cannot restart {server}: {', '.join(missing)} not found")
    port = PORTS[server]
    stop, start = _CONTROL[server]
    try:
        await stop()
        await _wait_port(port, up=False)
        yield
    finally:
        if not _listening(port):
            await start()
            await _wait_port(port, up=True)


def handler_app(tmp_path: Path, handler: str) -> Starlette:
    """The real app: SQLite in ``tmp_path``, a signed Reducto source, one ``[[handlers]]``.

    ``handler`` is the entry's body (type and options); it is named "queue" and retried fast:
    while a broker is down its circuit opens and probes every second.
    """
    from receiver.config.load import load_settings
    from receiver.service.app import create_app  # here, so require_service stays a light import

    config = tmp_path / "jobhook.toml"
    config.write_text(
        f"""
data_dir = "{tmp_path / "data"}"
[sources.reducto]
provider = "reducto"
secrets = ["{SECRET}"]
[[handlers]]
name = "queue"
max_attempts = 100
backoff_initial = 0.2
backoff_max = 0.5
circuit_cooldown_seconds = 1
{handler}
""",
        encoding="utf-8",
    )
    return create_app(load_settings(config, environ={}))


async def send_webhook(url: str, job_id: str) -> None:
    """POST a signed "Completed" webhook for ``job_id``; it must be accepted."""
    body = reducto_body(job_id, customer="acme")
    async with httpx.AsyncClient() as client:
        response = await client.post(
            f"{url}/webhooks/reducto", content=body, headers=signed_headers(body, msg_id=job_id)
        )
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "accepted"


async def wait_for_dispatch(
    app: Starlette, job_id: str, done: Callable[[DispatchRow], bool], timeout: float = 20.0
) -> DispatchRow:
    """Poll the store until the job's one dispatch satisfies ``done``; return it."""
    deadline = time.monotonic() + timeout
    rows: list[DispatchRow] = []
    while time.monotonic() < deadline:
        rows = await app.state.store.dispatches_for("reducto", job_id)
        if rows and done(rows[0]):
            return rows[0]
        await asyncio.sleep(0.05)
    pytest.fail(f"the dispatch of {job_id!r} did not get there within {timeout}s: {rows}")


@contextlib.asynccontextmanager
async def postgres_database() -> AsyncIterator[str]:
    """A new, empty PostgreSQL database for the block, dropped after it; yields its URL.

    Skips (or fails, when services are required) without the server or the 'postgres' extra.
    """
    asyncpg = require_module("asyncpg", "postgres")
    admin_url = urlsplit(POSTGRES_ADMIN_URL)
    require_service("PostgreSQL", admin_url.hostname or HOST, admin_url.port or 5432)
    name = f"jobhook_test_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(POSTGRES_ADMIN_URL)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    try:
        yield urlunsplit(admin_url._replace(path=f"/{name}"))
    finally:
        admin = await asyncpg.connect(POSTGRES_ADMIN_URL)
        try:
            # FORCE ends what a killed replica left connected.
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()
