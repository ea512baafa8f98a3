"""A real ``python -m receiver serve`` process: started, killed, restarted; logs kept in a file."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from typing import TYPE_CHECKING

import httpx

from tests.support import free_port

if TYPE_CHECKING:
    from pathlib import Path


class Service:
    """One service configuration on one port; every run appends its log lines to ``log``."""

    def __init__(
        self, config: Path, log: Path, *, level: str = "info", own_session: bool = False
    ) -> None:
        self.config = config
        self.log = log
        self.level = level
        self.own_session = own_session
        """Start it as a terminal's job is: leader of its own process group, which a test may
        signal as a whole (``os.killpg(process.pid, ...)``)."""
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.started_at = 0.0
        """When (monotonic) the last start began."""

    def start(self) -> None:
        """Start the service (not yet ready: see ``wait_ready``)."""
        assert self.process is None or self.process.poll() is not None, "already running"
        env = {**os.environ, "JOBHOOK_LOG__FORMAT": "json", "JOBHOOK_LOG__LEVEL": self.level}
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "receiver", "serve", "--config", str(self.config),
                 "--port", str(self.port)],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=self.own_session,
            )  # fmt: skip
        self.started_at = time.monotonic()
        self.starts += 1

    async def wait_ready(self, timeout: float = 60.0) -> float:
        """Seconds until ``/readyz`` answers 200; fails when the process exits or time runs out."""
        assert self.process is not None
        started = time.monotonic()
        async with httpx.AsyncClient(timeout=5.0) as client:
            while True:
                if self.process.poll() is not None:
                    raise AssertionError(
                        f"the service exited with {self.process.returncode}: see {self.log}"
                    )
                with contextlib.suppress(httpx.TransportError):
                    if (await client.get(f"{self.url}/readyz")).status_code == 200:
                        return time.monotonic() - started
                if time.monotonic() - started > timeout:
                    raise AssertionError(f"the service was not ready within {timeout}s")
                await asyncio.sleep(0.05)

    async def is_ready(self, client: httpx.AsyncClient | None = None) -> bool:
        """Whether ``/readyz`` answers 200 right now (through ``client``, to ask often)."""
        async with contextlib.AsyncExitStack() as stack:
            if client is None:
                client = await stack.enter_async_context(httpx.AsyncClient(timeout=1.0))
            try:
                return (await client.get(f"{self.url}/readyz")).status_code == 200
            except httpx.TransportError:
                return False

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs, leases and half-written batches stay as they are."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    async def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait for a clean exit; its exit status."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return await asyncio.to_thread(self.process.wait, timeout)

    def close(self) -> None:
        """Kill whatever still runs (cleanup after a failure)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)

    def log_text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace") if self.log.exists() else ""
