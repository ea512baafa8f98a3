"""``Simulator``: one fake provider — its API, its clock, its limits and its webhook sender."""

from __future__ import annotations

import asyncio
import hmac
import random
from typing import TYPE_CHECKING, Any, Self
from urllib.parse import urlsplit

import httpx
import structlog

from receiver.config.settings import check_svix_secret
from receiver.errors import ConfigError
from receiver.secret import Secret
from receiver.sim.blobs import BlobHost, BlobSpec
from receiver.sim.clock import SystemClock
from receiver.sim.jobs import JobBook
from receiver.sim.journal import RequestLog, safe_url
from receiver.sim.limits import Fault, Faults, RateLimiter
from receiver.sim.sender import SenderSettings, WebhookSender
from receiver.sim.shapes import SHAPES

if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import TracebackType

    from receiver.sim.clock import Clock
    from receiver.sim.jobs import Job, Outcome, ResultMode, WebhookMode
    from receiver.sim.limits import Target
    from receiver.sim.sender import Delivery

log = structlog.get_logger("receiver.sim")


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(f"simulator: {message}")


class Simulator:
    """A faithful fake of one provider's API.

    Serve ``build_app(sim)`` (``receiver.sim.api``: its lifespan runs the webhook sender), or
    ``async with`` the simulator to run the sender without serving; not both at once.
    """

    def __init__(
        self,
        provider: str = "reducto",
        *,
        api_key: str | Sequence[str],
        webhook_url: str | None = None,
        secret: str | None = None,
        native_secret: str | None = None,
        drop: float = 0.0,
        seed: int = 0,
        speed: float = 1.0,
        requests_per_minute: float | None = None,
        rate_window: float = 60.0,
        url_ttl: float = 3600.0,
        result_bytes: int = 256 * 1024,
        duration: float = 5.0,
        pages: int = 3,
        result: ResultMode | None = None,
        fail_rate: float = 0.0,
        error_code: str | None = None,
        retry_delays: Sequence[float] = (0.5, 1.0, 2.0, 5.0),
        webhook_timeout: float = 15.0,
        header_family: str = "svix",
        clock: Clock | None = None,
        tick: float = 0.02,
        log_limit: int = 200_000,
    ) -> None:
        _check(provider in SHAPES, f"unknown provider {provider!r}; known: {', '.join(SHAPES)}")
        keys = (api_key,) if isinstance(api_key, str) else tuple(api_key)
        _check(bool(keys) and all(keys), "api_key must be one or more non-empty keys")
        _check(0.0 <= drop <= 1.0, "drop must be a fraction between 0 and 1")
        _check(
            speed > 0 and rate_window > 0 and url_ttl > 0 and tick > 0,
            "speed, rate_window, url_ttl and tick must be positive",
        )
        _check(duration >= 0 and pages >= 1 and result_bytes >= 1, "bad job defaults")
        _check(0.0 <= fail_rate <= 1.0, "fail_rate must be a fraction between 0 and 1")
        _check(all(d >= 0 for d in retry_delays), "retry delays must not be negative")
        _check(header_family in ("svix", "webhook"), "header_family must be svix or webhook")
        if webhook_url is not None:
            _check(webhook_url.startswith(("http://", "https://")), "webhook_url must be http(s)")
            _check(secret is not None, "a webhook_url needs a whsec_ secret to sign with")
        if secret is not None:
            try:
                check_svix_secret(secret)
            except ValueError as exc:
                raise ConfigError(f"simulator: {exc}") from None
        self.shape = SHAPES[provider]()
        self.provider = provider
        if result is not None:
            known = " or ".join(self.shape.results)
            _check(result in self.shape.results, f"{provider} results are {known}, not {result}")
        if error_code is not None:
            known = ", ".join(self.shape.failures)
            _check(error_code in self.shape.failures, f"{provider} error codes are {known}")
        self.default_result: ResultMode = result or self.shape.results[0]
        """How every job's result is delivered unless a job asks otherwise (``--result``)."""
        self.fail_rate = fail_rate
        self.default_error_code = error_code
        self._failures = random.Random(f"failures:{seed}")
        self.clock: Clock = clock or SystemClock()
        self.speed = speed
        self.default_duration = duration
        self.default_pages = pages
        self.default_result_bytes = result_bytes
        self._keys = tuple(Secret(k) for k in keys)
        rpm = requests_per_minute or self.shape.default_rpm
        self.limiter = RateLimiter(self.clock, max(1, int(rpm * rate_window / 60)), rate_window)
        self.faults = Faults()
        self.log = RequestLog(log_limit)
        self.blobs = BlobHost(self.clock, url_ttl)
        self.jobs = JobBook(self.clock, self.shape.new_id, self.shape.phases_for, seed)
        settings = SenderSettings(
            url=webhook_url,
            secret=Secret(secret) if secret else None,
            native_secret=Secret(native_secret) if native_secret else None,
            drop=drop,
            seed=seed,
            retry_delays=tuple(retry_delays),
            timeout=webhook_timeout,
            header_family=header_family,
        )
        self.sender = WebhookSender(self.jobs, self.shape, self.clock, settings)
        self.tick = tick
        self._stop: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        return f"Simulator(provider={self.provider!r}, jobs={len(self.jobs)})"

    def authorised(self, presented: str | None) -> bool:
        """Whether ``presented`` is one of the configured API keys (constant-time compare)."""
        if presented is None:
            return False
        given = presented.encode()
        return any([hmac.compare_digest(given, k.reveal().encode()) for k in self._keys])

    def create_jobs(
        self,
        count: int = 1,
        *,
        pages: int | None = None,
        outcome: Outcome = "succeeded",
        result: ResultMode | None = None,
        duration: float | None = None,
        result_bytes: int | None = None,
        metadata: dict[str, Any] | None = None,
        error_code: str | None = None,
        kind: str = "",
        webhook_url: str | None = None,
        webhook_mode: WebhookMode = "svix",
        document: str | None = None,
        webhook_headers: dict[str, str] | None = None,
    ) -> list[str]:
        """Start ``count`` jobs now; ValueError when this provider cannot return ``result``
        or does not document ``error_code``."""
        if error_code is not None and error_code not in self.shape.failures:
            known = ", ".join(self.shape.failures)
            raise ValueError(f"{self.provider} error codes are {known}")
        mode = result or self.default_result
        if mode not in self.shape.results:
            raise ValueError(f"{self.provider} results are {' or '.join(self.shape.results)}")
        if outcome not in ("succeeded", "failed"):
            raise ValueError("outcome must be 'succeeded' or 'failed'")
        made = self.jobs.create(
            count=count,
            pages=pages or self.default_pages,
            outcome=outcome,
            result=mode,
            duration=self.default_duration if duration is None else duration,
            speed=self.speed,
            result_bytes=result_bytes or self.default_result_bytes,
            metadata=metadata or {},
            error_code=error_code or (self.default_error_code if outcome == "failed" else None),
            kind=kind,
            webhook_url=webhook_url,
            webhook_mode=webhook_mode,
            document=document,
            webhook_headers=webhook_headers,
        )
        return [job.id for job in made]

    def draw_failure(self) -> bool:
        """Whether a job submitted now fails (``fail_rate``, drawn from the seed's sequence)."""
        return self.fail_rate > 0 and self._failures.random() < self.fail_rate

    def last_job_of(self, document: str) -> Job | None:
        """The newest job of ``document`` (a submission's URL), if there is one."""
        for job in reversed(self.jobs.all()):
            if self.shape.document_of(job) == document:
                return job
        return None

    @property
    def signs(self) -> bool:
        """Whether this simulator can sign webhooks (it was given a ``whsec_`` secret)."""
        return self.sender.settings.secret is not None

    def inject(
        self,
        *,
        count: int = 1,
        status: int | None = None,
        retry_after: int | None = None,
        latency: float = 0.0,
        target: Target = "api",
        truncate: int | None = None,
    ) -> None:
        """Make the next ``count`` requests to ``target`` fail, slow down or get cut short."""
        self.faults.add(Fault(count, target, status, retry_after, latency, truncate))

    def blob_spec(self, job: Job) -> BlobSpec:
        return BlobSpec(self.shape.blob_kind, job.result_bytes)

    @property
    def deliveries(self) -> list[Delivery]:
        """Every webhook message so far, dropped ones included."""
        return list(self.sender.deliveries)

    def status(self, job_id: str) -> str:
        """The provider's status word for a job right now; KeyError for an unknown id."""
        job = self.jobs.get(job_id)
        if job is None:
            raise KeyError(job_id)
        return job.snapshot(self.clock.time()).phase.word

    def job_view(self, job_id: str) -> dict[str, Any] | None:
        """The simulator's own view of a job (timeline and webhooks), for tests and humans."""
        job = self.jobs.get(job_id)
        if job is None:
            return None
        snap = job.snapshot(self.clock.time())
        return {
            "job_id": job.id,
            "provider": self.provider,
            "status": snap.phase.word,
            "state": snap.phase.state,
            "outcome": job.outcome,
            "result": job.result,
            "result_bytes": job.result_bytes,
            "pages": job.pages,
            "duration": job.duration,
            "created": job.created,
            "finishes": job.finishes_at,
            "metadata": job.metadata,
            "kind": job.kind,
            "webhook_url": _origin(job.webhook_url),
            "webhook_mode": job.webhook_mode,
            "webhooks": [d.to_json() for d in self.sender.by_job.get(job.id, [])],
        }

    async def __aenter__(self) -> Self:
        if self._stop is not None:
            raise RuntimeError("the simulator is already running")
        self.sender.client = httpx.AsyncClient(trust_env=False)
        self._stop = asyncio.Event()
        self._task = asyncio.create_task(self.sender.run(self._stop, self.tick))
        log.info(
            "sim_started",
            provider=self.provider,
            jobs=len(self.jobs),
            webhook_url=safe_url(self.sender.settings.url),
            drop=self.sender.settings.drop,
        )
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._stop is not None
        assert self._task is not None
        self._stop.set()
        try:
            await asyncio.wait_for(self._task, timeout=5.0)
        except TimeoutError:
            log.warning("sim_sender_stop_timeout")
        await self.sender.aclose()
        if self.sender.client is not None:
            await self.sender.client.aclose()
            self.sender.client = None
        self._stop = self._task = None
        log.info("sim_stopped", provider=self.provider)


def _origin(url: str | None) -> str | None:
    """Where a job's webhooks go, without the path: a direct webhook's path holds a secret."""
    if url is None:
        return None
    parts = urlsplit(url)
    host = parts.hostname or ""
    return f"{parts.scheme}://{host}" + ("" if parts.port is None else f":{parts.port}")
