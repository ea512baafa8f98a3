"""Test helpers: real svix signing, real uvicorn servers on loopback, config files."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from svix.webhooks import Webhook

from receiver.service.serving import free_port as serving_free_port
from receiver.service.serving import serving

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager

    from starlette.types import ASGIApp

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
OLD_SECRET = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


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


free_port = serving_free_port


def live_server(app: ASGIApp, port: int | None = None) -> AbstractAsyncContextManager[str]:
    """Serve ``app`` with uvicorn on loopback for the duration of the block; yields its URL."""
    return serving(app, port=port)


def write_config(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path
