"""Webhooks signed as Svix signs them, written ahead of a run: signing costs the server nothing."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from svix.webhooks import Webhook

from bench.procs import SECRET

if TYPE_CHECKING:
    from pathlib import Path


def reducto_body(job_id: str, status: str = "Completed") -> str:
    """A Reducto ``async.update`` body as its fixtures show it."""
    return json.dumps(
        {"status": status, "job_id": job_id, "metadata": {"user_id": "123"}},
        separators=(",", ":"),
    )


def signed(message_id: str, body: str, now: datetime, webhook: Webhook) -> dict[str, str]:
    return {
        "svix-id": message_id,
        "svix-timestamp": str(int(now.timestamp())),
        "svix-signature": webhook.sign(message_id, now, body),
        "content-type": "application/json",
    }


def write_requests(
    prefix: Path, tag: str, count: int, files: int, status: str = "Completed"
) -> list[str]:
    """``count`` webhooks with unique message and job ids, dealt over ``files`` files for wrk."""
    webhook = Webhook(SECRET)
    now = datetime.now(tz=UTC)
    ts = str(int(now.timestamp()))
    outs = [open(f"{prefix}.{i}", "w", encoding="utf-8") for i in range(files)]  # noqa: SIM115
    ids = []
    try:
        for n in range(count):
            job_id = f"{tag}-{n:07d}"
            message_id = f"msg_{job_id}"
            body = reducto_body(job_id, status)
            signature = webhook.sign(message_id, now, body)
            outs[n % files].write(f"{message_id}\t{ts}\t{signature}\t{body}\n")
            ids.append(job_id)
    finally:
        for out in outs:
            out.close()
    return ids
