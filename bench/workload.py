"""The realistic ingest workload: ids, bodies, and the order webhooks arrive in, as providers send.

Job ids are random, as the providers make them: UUID4 (Reducto, DocuRift) and 24 base62
characters (Knowhere, DocExtract), half and half. Message ids are Svix's: ``msg_`` and a
millisecond KSUID (27 base62 characters of a 5-byte timestamp and 15 random bytes, what Svix's
server makes with ``svix_ksuid::KsuidMs``), so they sort by the time they were made. The
``random-ids`` workload is the same traffic with ``msg_`` and 27 random base62 characters, as a
sender with ids of its own may send. Bodies are Reducto's ``async.update`` webhook as the
fixtures show it (``tests/fixtures/providers/reducto.json``), with the metadata a client
attaches to its jobs.
Of the requests, about 10 % are a non-terminal update (``InProgress``) sent before its job's
terminal event, and about 5 % are Svix retries of an earlier message (same message id, same
body: a duplicate). Timestamps are current (Svix rejects stale ones).

``sequential`` is the workload the benchmark used to run: ``tag-0000001``, ``tag-0000002``...
one terminal webhook per job, no retries, minimal bodies.
"""

from __future__ import annotations

import json
import random
import secrets
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "providers"
RETRY_SHARE = 0.05
PROCESSING_SHARE = 0.10
WORKLOADS = ("realistic", "random-ids", "sequential")
MESSAGE_IDS = {"realistic": "ksuid", "random-ids": "random"}
"""The message ids of each realistic workload: Svix's millisecond KSUIDs, or fully random."""
_MIX = (
    f"~{RETRY_SHARE:.0%} Svix retries of an earlier message, ~{PROCESSING_SHARE:.0%} "
    "InProgress updates before their terminal event, Reducto-shaped bodies with metadata, "
    "current timestamps"
)
DESCRIPTION = {
    "realistic": (
        "random job ids (UUID4 and 24-char base62, mixed), Svix message ids msg_ + "
        f"millisecond KSUID (time-ordered), {_MIX}"
    ),
    "random-ids": (
        "random job ids (UUID4 and 24-char base62, mixed), fully random message ids msg_ + 27 "
        f"base62 (a sender's own ids), {_MIX}"
    ),
    "sequential": (
        "sequential job ids tag-0000001..., one terminal Reducto webhook per job, unique "
        "message ids, minimal bodies, no retries (the benchmark's old workload)"
    ),
}


def base62(n: int, rng: random.Random | None = None) -> str:
    pick = (rng or _RNG).choices
    return "".join(pick(BASE62, k=n))


_RNG = random.Random()


def job_id(rng: random.Random) -> str:
    """A provider's job id: UUID4 or 24 base62 characters, one or the other at random."""
    if rng.random() < 0.5:
        return str(uuid.UUID(int=rng.getrandbits(128), version=4))
    return base62(24, rng)


KSUID_EPOCH = 1_400_000_000
"""KSUID's epoch (2014-05-13), in Unix seconds."""


def ksuid_ms(at: float, payload: int) -> str:
    """The millisecond KSUID of time ``at`` (Unix seconds) and a 120-bit ``payload``, as
    ``svix_ksuid.KsuidMs(datetime, payload)`` writes it: 4 bytes of seconds since the KSUID
    epoch, 1 byte of the millisecond / 4, 15 bytes of payload, in 27 base62 characters."""
    seconds, millis = divmod(int(at * 1000) - KSUID_EPOCH * 1000, 1000)
    value = (seconds << 8 | millis // 4) << 120 | payload
    digits = []
    while value:
        value, digit = divmod(value, 62)
        digits.append(BASE62[digit])
    return "".join(reversed(digits)).rjust(27, "0")


def message_id(rng: random.Random, kind: str = "ksuid", at: float | None = None) -> str:
    """A Svix message id made at ``at`` (default now): a millisecond KSUID, or (``random``)
    27 random base62 characters."""
    if kind == "random":
        return "msg_" + base62(27, rng)
    return "msg_" + ksuid_ms(time.time() if at is None else at, rng.getrandbits(120))


def _fixture() -> dict[str, object]:
    data: dict[str, object] = json.loads((FIXTURES / "reducto.json").read_text("utf-8"))
    return data


def metadata(rng: random.Random) -> dict[str, object]:
    """What a client attaches to a job (Reducto echoes it in every webhook)."""
    return {
        "user_id": str(rng.randrange(1, 5000)),
        "document": f"invoices/2026/{base62(10, rng)}.pdf",
        "tenant": f"org_{base62(8, rng)}",
        "pipeline": rng.choice(("invoices", "contracts", "receipts", "statements")),
    }


def body(job: str, status: str, meta: dict[str, object]) -> str:
    """A Reducto ``async.update`` body in the fixture's shape (key order included)."""
    shape = dict(_FIXTURE_COMPLETED)
    shape.update(status=status, job_id=job, metadata=meta)
    return json.dumps(shape)


_FIXTURE_COMPLETED: dict[str, object] = dict(_fixture()["webhook_completed"])  # type: ignore[call-overload]


@dataclass(frozen=True, slots=True)
class Webhook:
    message_id: str
    job_id: str
    body: str
    kind: str
    """new (a job's terminal event), processing (a non-terminal update) or retry (a duplicate)."""


def realistic(
    seed: int | None = None, ids: str = "ksuid", job_ids: Iterator[str] | None = None
) -> Iterator[Webhook]:
    """An endless stream of webhooks in the realistic mix (see the module's docstring), with
    message ids of the kind ``ids`` (``ksuid`` or ``random``), each made as it is yielded; each
    new job's id is the next of ``job_ids`` when given (jobs a simulated job API knows), else a
    random one in a provider's shape. The stream ends when ``job_ids`` does."""
    rng = random.Random(seed)
    sent: list[Webhook] = []
    pending: list[tuple[str, str]] = []  # (job, terminal body): jobs that had their InProgress
    while True:
        roll = rng.random()
        if roll < RETRY_SHARE and sent:
            earlier = sent[rng.randrange(len(sent))]
            yield Webhook(earlier.message_id, earlier.job_id, earlier.body, "retry")
            continue
        if pending and (roll < RETRY_SHARE + PROCESSING_SHARE or len(pending) > 64):
            job, text = pending.pop(rng.randrange(len(pending)))
            hook = Webhook(message_id(rng, ids), job, text, "new")
        else:
            job = job_id(rng) if job_ids is None else next(job_ids, "")
            if not job:
                return
            meta = metadata(rng)
            status = "Completed" if rng.random() < 0.95 else "Failed"
            text = body(job, status, meta)
            if rng.random() < PROCESSING_SHARE / (1 - RETRY_SHARE - PROCESSING_SHARE):
                pending.append((job, text))
                hook = Webhook(message_id(rng, ids), job, body(job, "InProgress", meta),
                               "processing")  # fmt: skip
            else:
                hook = Webhook(message_id(rng, ids), job, text, "new")
        sent.append(hook)
        if len(sent) > 100_000:
            del sent[:50_000]
        yield hook


def sequential(tag: str, job_ids: Iterator[str] | None = None) -> Iterator[Webhook]:
    n = 0
    while True:
        job = f"{tag}-{n:07d}" if job_ids is None else next(job_ids, "")
        if not job:
            return
        text = json.dumps({"status": "Completed", "job_id": job, "metadata": {"user_id": "123"}})
        yield Webhook(f"msg_{job}", job, text, "new")
        n += 1


def stream(workload: str, tag: str, job_ids: Iterator[str] | None = None) -> Iterator[Webhook]:
    """The workload's webhooks; new jobs take their ids from ``job_ids`` when given."""
    if workload == "sequential":
        return sequential(tag, job_ids)
    return realistic(secrets.randbits(32), MESSAGE_IDS[workload], job_ids)
