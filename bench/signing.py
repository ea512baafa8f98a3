"""Webhooks signed as Svix signs them, written ahead of a run: signing costs the server nothing."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from svix.webhooks import Webhook

from tests.support import SECRET, reducto_body

if TYPE_CHECKING:
    from pathlib import Path


def body(job_id: str) -> str:
    """A terminal Reducto ``async.update`` body, as the tests send it."""
    return reducto_body(job_id, user_id="123").decode()


def write_requests(prefix: Path, tag: str, count: int, files: int) -> None:
    """``count`` webhooks with unique message and job ids, dealt over ``files`` files for wrk."""
    webhook = Webhook(SECRET)  # one signer for them all: tests.support's makes one per call
    now = datetime.now(tz=UTC)
    ts = str(int(now.timestamp()))
    outs = [open(f"{prefix}.{i}", "w", encoding="utf-8") for i in range(files)]  # noqa: SIM115
    try:
        for n in range(count):
            job_id = f"{tag}-{n:07d}"
            message_id = f"msg_{job_id}"
            text = body(job_id)
            signature = webhook.sign(message_id, now, text)
            outs[n % files].write(f"{message_id}\t{ts}\t{signature}\t{text}\n")
    finally:
        for out in outs:
            out.close()
