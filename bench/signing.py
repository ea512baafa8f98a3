"""Webhooks signed as Svix signs them, written ahead of a run: signing costs the server nothing."""

from __future__ import annotations

import base64
import hashlib
import hmac
from datetime import UTC, datetime
from itertools import islice
from typing import TYPE_CHECKING

from bench import workload
from tests.support import SECRET, reducto_body

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

_KEY = base64.b64decode(SECRET.removeprefix("whsec_"))


def body(job_id: str) -> str:
    """A terminal Reducto ``async.update`` body, as the tests send it."""
    return reducto_body(job_id, user_id="123").decode()


def sign(message_id: str, timestamp: str, text: str) -> str:
    """The ``svix-signature`` header Svix sends (what ``svix.webhooks.Webhook.sign`` makes,
    without its per-call key decoding: a million requests sign in seconds)."""
    digest = hmac.new(_KEY, f"{message_id}.{timestamp}.{text}".encode(), hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def write_requests(
    prefix: Path, tag: str, count: int, files: int, workload_name: str = "sequential", *,
    job_ids: Iterator[str] | None = None, stamp: Callable[[int], int] | None = None,
) -> dict[str, int]:  # fmt: skip
    """``count`` webhooks of the workload, dealt over ``files`` files for wrk; how many of
    each kind (new, processing, retry) were written. New jobs take their ids from ``job_ids``
    when given (fewer webhooks are written should it run out); each request is signed at
    ``stamp(n)`` (Unix seconds) when given, else all of them now: a run longer than Svix's
    five minutes of tolerance stamps each with the time it is due."""
    now = str(int(datetime.now(tz=UTC).timestamp()))
    kinds: dict[str, int] = {}
    outs = [open(f"{prefix}.{i}", "w", encoding="utf-8") for i in range(files)]  # noqa: SIM115
    try:
        hooks = workload.stream(workload_name, tag, job_ids)
        for n, hook in enumerate(islice(hooks, count)):
            ts = now if stamp is None else str(stamp(n))
            signature = sign(hook.message_id, ts, hook.body)
            outs[n % files].write(f"{hook.message_id}\t{ts}\t{signature}\t{hook.body}\n")
            kinds[hook.kind] = kinds.get(hook.kind, 0) + 1
    finally:
        for out in outs:
            out.close()
    return kinds
