"""Helpers of the client's tests: one interface over ``Client`` (run in a thread, since the
server shares the test's loop) and ``AsyncClient``, so each behaviour is checked on both."""

from __future__ import annotations

import asyncio
import builtins
import itertools
import os
import signal
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import httpx

from receiver.client import AsyncClient, Client
from tests.adminsupport import TOKEN
from tests.support import SECRET

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from receiver.client import (
        AuditEntry,
        Completion,
        Job,
        JobDetail,
        Page,
        ReprocessOutcome,
        Stats,
    )


class Both:
    """The client's methods, awaited, whichever of the two clients is under test."""

    def __init__(self, kind: str, url: str, token: str | None = TOKEN, **options: Any) -> None:
        self.kind = kind
        env = {"JOBHOOK_URL": url, **({"JOBHOOK_ADMIN_TOKEN": token} if token else {})}
        self.sync = Client(environ=env, **options) if kind == "sync" else None
        self.aio = AsyncClient(environ=env, **options) if kind == "async" else None

    @property
    def client(self) -> Client | AsyncClient:
        found = self.sync or self.aio
        assert found is not None
        return found

    async def close(self) -> None:
        if self.sync is not None:
            self.sync.close()
        if self.aio is not None:
            await self.aio.aclose()

    async def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        if self.sync is not None:
            return await asyncio.to_thread(getattr(self.sync, name), *args, **kwargs)
        assert self.aio is not None
        return await getattr(self.aio, name)(*args, **kwargs)

    async def track(self, source: str, job_id: str, **kwargs: Any) -> Job:
        job: Job = await self._call("track", source, job_id, **kwargs)
        return job

    async def get(self, source: str, job_id: str) -> JobDetail:
        detail: JobDetail = await self._call("get", source, job_id)
        return detail

    async def page(self, **kwargs: Any) -> Page:
        page: Page = await self._call("page", **kwargs)
        return page

    async def list(self, **kwargs: Any) -> list[Job]:
        if self.sync is not None:
            sync = self.sync
            return await asyncio.to_thread(lambda: list(sync.list(**kwargs)))
        assert self.aio is not None
        return [job async for job in self.aio.list(**kwargs)]

    async def audit(self, **kwargs: Any) -> list[AuditEntry]:
        if self.sync is not None:
            sync = self.sync
            return await asyncio.to_thread(lambda: list(sync.audit(**kwargs)))
        assert self.aio is not None
        return [entry async for entry in self.aio.audit(**kwargs)]

    async def wait(self, source: str, job_id: str, **kwargs: Any) -> JobDetail:
        detail: JobDetail = await self._call("wait", source, job_id, **kwargs)
        return detail

    async def replay(self, source: str, job_id: str, **kwargs: Any) -> int:
        count: int = await self._call("replay", source, job_id, **kwargs)
        return count

    async def reprocess(self, source: str, job_id: str, **kwargs: Any) -> ReprocessOutcome:
        outcome: ReprocessOutcome = await self._call("reprocess", source, job_id, **kwargs)
        return outcome

    async def stats(self, period: str = "24h") -> Stats:
        stats: Stats = await self._call("stats", period)
        return stats

    async def status(self) -> dict[str, Any]:
        status: dict[str, Any] = await self._call("status")
        return status

    async def export(self, **kwargs: Any) -> str:
        if self.sync is not None:
            sync = self.sync
            return await asyncio.to_thread(lambda: "".join(sync.export(**kwargs)))
        assert self.aio is not None
        return "".join([chunk async for chunk in self.aio.export(**kwargs)])

    def events(self, count: int, **kwargs: Any) -> asyncio.Task[builtins.list[Completion]]:
        """A task that collects the next ``count`` completions, then stops reading."""
        if self.sync is not None:
            sync = self.sync

            def collect() -> builtins.list[Completion]:
                stream = sync.events(**kwargs)
                try:
                    return list(itertools.islice(stream, count))
                finally:
                    stream.close()

            return asyncio.create_task(asyncio.to_thread(collect))
        assert self.aio is not None
        aio = self.aio

        async def gather() -> builtins.list[Completion]:
            found: builtins.list[Completion] = []
            stream = aio.events(**kwargs)
            try:
                async for completion in stream:
                    found.append(completion)
                    if len(found) == count:
                        break
            finally:
                await stream.aclose()
            return found

        return asyncio.create_task(gather())


def serve_config(tmp_path: Path, extra: str = "") -> Path:
    """A service config: a fixed SQLite file, one Reducto source, a file handler, the token."""
    config = tmp_path / "jobhook.toml"
    config.write_text(f"""
data_dir = "{tmp_path / "data"}"
[server]
admin_token = "{TOKEN}"
shutdown_grace_seconds = 1
[sources.reducto]
provider = "reducto"
secrets = ["{SECRET}"]
[[handlers]]
name = "files"
type = "file"
dir = "{tmp_path / "out"}"
{extra}
""", encoding="utf-8")  # fmt: skip
    return config


def start_serve(config: Path, port: int) -> subprocess.Popen[bytes]:
    """``jobhook serve`` as its own process (``python -m receiver``), logs discarded."""
    return subprocess.Popen(
        [sys.executable, "-m", "receiver", "serve", "--config", str(config), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "JOBHOOK_LOG__FORMAT": "json"},
    )


def kill(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=10)


async def ready(url: str, timeout: float = 20.0) -> None:
    async with httpx.AsyncClient() as client, asyncio.timeout(timeout):
        while True:
            try:
                if (await client.get(f"{url}/readyz")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.05)


async def until(check: Callable[[], bool], timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.02)
