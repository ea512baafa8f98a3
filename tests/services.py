"""The machine's real servers (PostgreSQL, Redis, NATS, RabbitMQ): skip without them, or fail.

Tests that need one call ``require_service`` first. On a machine without the server they skip
with the reason; under ``JOBHOOK_REQUIRE_SERVICES=1`` (set by ``.ci/run``) they fail instead,
so CI cannot pass by skipping them.
"""

from __future__ import annotations

import os
import socket

import pytest


def services_required() -> bool:
    """True when backend tests must run (``JOBHOOK_REQUIRE_SERVICES=1``), not skip."""
    return os.environ.get("JOBHOOK_REQUIRE_SERVICES") == "1"


def require_service(name: str, host: str, port: int) -> None:
    """Skip (or fail, when services are required) unless ``host:port`` accepts a TCP connection."""
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return
    except OSError as exc:
        reason = f"{name} not reachable on {host}:{port} ({exc.strerror or exc})"
    if services_required():
        pytest.fail(f"{reason}; JOBHOOK_REQUIRE_SERVICES=1 makes this test mandatory")
    pytest.skip(reason)
