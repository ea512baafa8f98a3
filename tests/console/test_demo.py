"""``jobhook demo --console`` prints the console's URL and a token that logs in, and serves the
console (with jobs that failed at the provider) until it is stopped."""

from __future__ import annotations

import asyncio
import contextlib
import io
import re

import httpx
import pytest
from rich.console import Console

from receiver.cli.demo import run_demo


@pytest.mark.timeout(90)
async def test_demo_with_console_prints_a_url_and_token_that_log_in() -> None:
    output = io.StringIO()
    task = asyncio.create_task(
        run_demo(5, 0.0, 60.0, Console(file=output, width=200, color_system=None), ui=True)
    )
    try:
        for _ in range(600):
            if "Still serving the console" in output.getvalue() or task.done():
                break
            await asyncio.sleep(0.1)
        assert not task.done(), output.getvalue()
        found = re.search(r"Console: (http://\S+/ui/) \(admin token: (\S+)\)", output.getvalue())
        assert found is not None, output.getvalue()
        url, token = found.groups()
        async with httpx.AsyncClient() as client:
            login = await client.post(f"{url}login", data={"token": token})
            assert login.status_code == 303
            page = await client.get(f"{url}jobs?state=failed")
        assert page.status_code == 200
        assert page.text.count("DOCUMENT_CORRUPT") == 1  # 5 // 5 jobs failed at the provider
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
