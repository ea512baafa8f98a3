"""SIGTERM to a real ``jobhook serve`` with open event streams: a prompt, clean exit."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from typing import TYPE_CHECKING

import httpx

from tests.adminsupport import AUTH, TOKEN
from tests.reliability.service import Service
from tests.support import SECRET

if TYPE_CHECKING:
    from pathlib import Path

STREAMS = 3


async def _open_stream(client: httpx.AsyncClient, url: str, opened: asyncio.Event) -> str:
    """Read one stream to its end; what it said."""
    text = ""
    async with client.stream("GET", f"{url}/events", headers=AUTH) as response:
        assert response.status_code == 200
        async for chunk in response.aiter_text():
            text += chunk
            opened.set()
    return text


async def test_sigterm_with_three_open_event_streams_exits_0_in_under_3s(tmp_path: Path) -> None:
    config = tmp_path / "jobhook.toml"
    config.write_text(
        f"""
data_dir = "{tmp_path / "data"}"
[server]
admin_token = "{TOKEN}"
shutdown_grace_seconds = 10
[sources.reducto]
provider = "reducto"
secrets = ["{SECRET}"]
"""
    )
    service = Service(config, tmp_path / "serve.log")
    service.start()
    try:
        await service.wait_ready()
        async with httpx.AsyncClient(timeout=30) as client:
            opened = [asyncio.Event() for _ in range(STREAMS)]
            streams = [
                asyncio.create_task(_open_stream(client, service.url, flag)) for flag in opened
            ]
            async with asyncio.timeout(10):
                for flag in opened:
                    await flag.wait()
            started = time.monotonic()
            assert service.process is not None
            service.process.send_signal(signal.SIGTERM)
            code = await asyncio.to_thread(service.process.wait, 15)
            elapsed = time.monotonic() - started
            said = await asyncio.gather(*streams)
    finally:
        service.close()
    assert code == 0
    assert elapsed < 3, f"SIGTERM took {elapsed:.1f}s with {STREAMS} open streams"
    assert all(text.startswith("retry:") for text in said)
    lines = [json.loads(line) for line in service.log_text().splitlines() if line.startswith("{")]
    assert [line for line in lines if line.get("level") in ("error", "critical")] == []
    assert "CancelledError" not in service.log_text()
    assert any(line.get("event") == "stopped" for line in lines)
