"""The webhook sender: announces status changes like Svix does, minus the webhooks it loses."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import heapq
import json
import random
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

import httpx
import structlog
from svix.webhooks import Webhook

if TYPE_CHECKING:
    from receiver.secret import Secret
    from receiver.sim.clock import Clock
    from receiver.sim.jobs import Job, JobBook
    from receiver.sim.shapes import Shape

log = structlog.get_logger("receiver.sim.sender")

DeliveryState = Literal["pending", "in_flight", "delivered", "failed", "dropped"]
DIRECT_RETRIES = 3
"""Reducto retries a direct (unsigned) webhook 3 times; Svix follows its own schedule."""


@dataclass(frozen=True, slots=True)
class Attempt:
    """One POST of a webhook: when (unix time), and the status code or the transport error."""

    at: float
    status_code: int | None
    error: str | None = None


@dataclass(eq=False, slots=True)
class Delivery:
    """One webhook message; every attempt carries the same id and body."""

    message_id: str
    job_id: str
    status: str
    body: bytes
    state: DeliveryState = "pending"
    attempts: list[Attempt] = field(default_factory=list)
    url: str | None = None
    """Where it goes: the job's own webhook URL, else the simulator's."""
    signed: bool = True
    headers: dict[str, str] = field(default_factory=dict)
    """What an unsigned callback carries besides its body (the headers its submission chose)."""

    def to_json(self) -> dict[str, Any]:
        attempts = [
            {"at": a.at, "status_code": a.status_code, "error": a.error} for a in self.attempts
        ]
        return {
            "message_id": self.message_id,
            "job_id": self.job_id,
            "status": self.status,
            "state": self.state,
            "signed": self.signed,
            "attempts": attempts,
        }


@dataclass(frozen=True, slots=True)
class SenderSettings:
    """Where and how webhooks go; ``drop`` is the fraction never sent at all."""

    url: str | None
    secret: Secret | None
    native_secret: Secret | None = None
    drop: float = 0.0
    seed: int = 0
    retry_delays: tuple[float, ...] = (0.5, 1.0, 2.0, 5.0)
    timeout: float = 15.0
    header_family: str = "svix"
    concurrency: int = 32


class WebhookSender:
    """Turns job transitions into deliveries and POSTs them with retries."""

    def __init__(self, book: JobBook, shape: Shape, clock: Clock, settings: SenderSettings) -> None:
        self._book = book
        self._shape = shape
        self._clock = clock
        self.settings = settings
        self._signer = Webhook(settings.secret.reveal()) if settings.secret else None
        self.client: httpx.AsyncClient | None = None
        self.deliveries: list[Delivery] = []
        self.by_job: dict[str, list[Delivery]] = {}
        self._waiting: list[tuple[float, int, Delivery]] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._slots = asyncio.Semaphore(settings.concurrency)
        self._counter = 0

    def _draw(self, job: Job, word: str) -> tuple[str, bool]:
        # Seeded per (job, status), so the same webhooks are lost whatever the timing.
        key = f"{self.settings.seed}:{job.id}:{word}"
        digest = hashlib.sha256(key.encode()).hexdigest()[:24]
        dropped = random.Random(key).random() < self.settings.drop
        return f"{self._shape.event_prefix}{digest}", dropped

    def collect(self) -> list[Delivery]:
        """New deliveries for the phases entered since the last call."""
        made = []
        for job, index in self._book.advance(self._clock.time()):
            url = job.webhook_url or self.settings.url
            if url is None or job.webhook_mode == "none":
                continue
            if not self._shape.sends_webhook(job, index):
                continue
            phase = job.phases[index]
            message_id, dropped = self._draw(job, phase.word)
            payload = self._shape.webhook_body(job, phase, job.entered_at(index), message_id)
            body = _json_bytes(payload)
            signed = job.webhook_mode != "direct"
            delivery = Delivery(message_id, job.id, phase.word, body, url=url, signed=signed,
                                headers=job.webhook_headers)  # fmt: skip
            self.deliveries.append(delivery)
            self.by_job.setdefault(job.id, []).append(delivery)
            made.append(delivery)
            if dropped:
                delivery.state = "dropped"
                log.info("sim_webhook_dropped", job_id=job.id, status=phase.word)
            else:
                self._schedule(delivery, 0.0)
        return made

    def _schedule(self, delivery: Delivery, delay: float) -> None:
        self._counter += 1
        due = asyncio.get_running_loop().time() + delay if delay else 0.0
        heapq.heappush(self._waiting, (due, self._counter, delivery))

    async def run_once(self) -> int:
        """One step: collect transitions, then start every attempt that is due; returns those."""
        self.collect()
        if self.client is None:
            return 0
        now = asyncio.get_running_loop().time()
        started = 0
        while self._waiting and self._waiting[0][0] <= now:
            _, _, delivery = heapq.heappop(self._waiting)
            delivery.state = "in_flight"
            task = asyncio.create_task(self._attempt(delivery))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            started += 1
        return started

    async def run(self, stop: asyncio.Event, tick: float = 0.02) -> None:
        """Repeat ``run_once`` every ``tick`` seconds until ``stop`` is set."""
        while not stop.is_set():
            try:
                await self.run_once()
            except Exception:
                log.exception("sim_sender_step_failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), tick)

    async def aclose(self) -> None:
        """Cancel attempts still in flight."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _headers(self, delivery: Delivery) -> dict[str, str]:
        if not delivery.signed:
            return {**delivery.headers, "content-type": "application/json",
                    "user-agent": "jobhook-simulator"}  # fmt: skip
        assert self._signer is not None
        timestamp = int(time.time())
        text = delivery.body.decode()
        signature = self._signer.sign(
            delivery.message_id, datetime.fromtimestamp(timestamp, UTC), text
        )
        family = self.settings.header_family
        headers = {
            f"{family}-id": delivery.message_id,
            f"{family}-timestamp": str(timestamp),
            f"{family}-signature": signature,
            "content-type": "application/json",
            "user-agent": "jobhook-simulator",
        }
        if self.settings.native_secret is not None:
            secret = self.settings.native_secret.reveal().encode()
            native = self._shape.native_headers(
                secret, delivery.body, delivery.message_id, timestamp
            )
            headers.update(native)
        return headers

    async def _attempt(self, delivery: Delivery) -> None:
        assert self.client is not None
        assert delivery.url is not None
        async with self._slots:
            at = time.time()
            try:
                response = await self.client.post(
                    delivery.url,
                    content=delivery.body,
                    headers=self._headers(delivery),
                    timeout=self.settings.timeout,
                )
                attempt = Attempt(at, response.status_code)
            except httpx.HTTPError as exc:
                attempt = Attempt(at, None, type(exc).__name__)
        delivery.attempts.append(attempt)
        number = len(delivery.attempts)
        fields = {
            "job_id": delivery.job_id,
            "status": delivery.status,
            "attempt": number,
            "status_code": attempt.status_code,
            "error": attempt.error,
        }
        if attempt.status_code is not None and 200 <= attempt.status_code < 300:
            delivery.state = "delivered"
            log.info("sim_webhook_delivered", **fields)
        elif number <= self._retries(delivery):
            delivery.state = "pending"
            delays = self.settings.retry_delays or (0.0,)
            self._schedule(delivery, delays[min(number, len(delays)) - 1])
            log.info("sim_webhook_retry_scheduled", **fields)
        else:
            delivery.state = "failed"
            log.warning("sim_webhook_gave_up", **fields)

    def _retries(self, delivery: Delivery) -> int:
        if not delivery.signed:
            return DIRECT_RETRIES
        return len(self.settings.retry_delays)


def _json_bytes(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, separators=(",", ":")).encode()
