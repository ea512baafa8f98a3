"""Test helpers: real svix signing, real uvicorn servers on loopback, config files."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import uvicorn
from svix.webhooks import Webhook

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from starlette.types import ASGIApp

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
OLD_SECRET = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"
FIXTURES = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures"


def signed_headers(
    body: bytes | str,
    *,
    secret: str = SECRET,
    msg_id: str = "msg_1",
    timestamp: int | None = None,
    family: str = "svix",
) -> dict[str, str]:
    """Headers the real svix signer would send for ``body``."""
    ts = int(time.time()) if timestamp is None else timestamp
    text = body.decode() if isinstance(body, bytes) else body
    signature = Webhook(secret).sign(msg_id, datetime.fromtimestamp(ts, tz=UTC), text)
    return {
        f"{family}-id": msg_id,
        f"{family}-timestamp": str(ts),
        f"{family}-signature": signature,
        "content-type": "application/json",
    }


def reducto_body(job_id: str = "job-1", status: str = "Completed", **metadata: Any) -> bytes:
    return json.dumps({"status": status, "job_id": job_id, "metadata": metadata}).encode()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.asynccontextmanager
async def live_server(app: ASGIApp, port: int | None = None) -> AsyncIterator[str]:
    """Serve ``app`` with uvicorn on loopback for the duration of the block; yields its URL."""
    port = port or free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, access_log=False,
                            lifespan="on", loop="asyncio")  # fmt: skip
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        deadline = time.monotonic() + 15
        while not server.started:
            if task.done() or time.monotonic() > deadline:
                raise RuntimeError("the server did not start (see the log above)")
            await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        with contextlib.suppress(SystemExit):
            await asyncio.wait_for(task, timeout=15)


def write_config(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path
