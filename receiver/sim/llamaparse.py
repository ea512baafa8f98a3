"""A faithful LlamaParse v2 API (parse jobs, as ``llama-cloud`` 2.19.0 speaks them), webhooks too.

``POST /api/v2/parse`` (JSON: ``tier``, ``version``, ``source_url`` or ``file_id``,
``webhook_configurations``, ``user_metadata``...) and ``POST /api/v2/parse/upload`` (multipart
``file`` and ``configuration``, the same options as JSON text) answer a job (``{id, project_id,
status: PENDING, ...}``); ``GET /api/v2/parse/{id}`` answers ``{job}``, with ``expand=`` adding
``markdown``, ``text``, ``items``, ``metadata``, ``markdown_full``, ``text_full`` once the job is
``COMPLETED``; ``POST .../cancel`` cancels; ``GET /api/v2/parse`` lists (``items``,
``next_page_token``). Content is kept ``retention`` seconds, then its expansions answer 404. Bearer
key, per-minute budget answered 429 with ``Retry-After``.

Each job's ``webhook_configurations`` are followed as LlamaCloud documents them: a POST per
status change to ``webhook_url`` for the events it lists (all when it lists none), with its
``webhook_headers``, the body a JSON object (``webhook_output_format = "json"``) or that object
JSON-encoded in a string (``"string"``, the default), and ``LC-Signature: sha256=<hex>`` (the
HMAC-SHA256 of the body) when it has a ``webhook_signing_secret``. The body's shape is not
documented: ``{event_id, event_type, timestamp, data: {the job}}`` is what docs/providers.md
assumes. Failed deliveries are sent again three times, a little later each time.

Outcomes by the document's name (its URL or file name): ``corrupt`` fails the job, ``torn``
completes it with a failed page (``parse.partial_success``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import httpx
from starlette.applications import Starlette
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from receiver.sim.polled import PolledSim, bearer, form_parts, outcome, require_key

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from starlette.requests import Request

    from receiver.sim.clouds import CloudOptions

TIERS = ("fast", "cost_effective", "agentic", "agentic_plus")
EVENTS = {
    "PENDING": "parse.pending",
    "RUNNING": "parse.running",
    "FAILED": "parse.error",
    "CANCELLED": "parse.cancelled",
}
CONTENT = ("markdown", "text", "items", "metadata", "markdown_full", "text_full")
PAGES = 2
DELIVERY_ATTEMPTS = 4
TICK = 0.05


@dataclass
class ParseJob:
    id: str
    started: float
    name: str
    tier: str
    user_metadata: dict[str, str] = field(default_factory=dict)
    webhooks: list[dict[str, Any]] = field(default_factory=list)
    cancelled: bool = False
    announced: set[str] = field(default_factory=set)
    project_id: str = "proj-sim"


@dataclass(frozen=True, slots=True)
class Delivery:
    """One webhook to send: where, the event, its headers and body."""

    url: str
    event: str
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True, slots=True)
class Sent:
    """One webhook POST the simulator made: where, the event, its headers and body, the answer."""

    url: str
    event: str
    headers: dict[str, str]
    body: bytes
    status: int | None


@dataclass
class LlamaParseSim(PolledSim):
    jobs: dict[str, ParseJob] = field(default_factory=dict)
    sent: list[Sent] = field(default_factory=list)

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/api/v2/parse/upload", self._upload, methods=["POST"]),
                Route("/api/v2/parse", self._create, methods=["POST"]),
                Route("/api/v2/parse", self._list, methods=["GET"]),
                Route("/api/v2/parse/{job_id}", self._job, methods=["GET"]),
                Route("/api/v2/parse/{job_id}/cancel", self._cancel, methods=["POST"]),
            ],
            lifespan=self._lifespan,
        )

    def status(self, job: ParseJob) -> str:
        if job.cancelled:
            return "CANCELLED"
        phase = self.phase(job.started)
        if phase != "done":
            return "PENDING" if phase == "queued" else "RUNNING"
        return "FAILED" if outcome(job.name) == "corrupt" else "COMPLETED"

    def event(self, job: ParseJob) -> str:
        """The webhook event of the job's current status."""
        status = self.status(job)
        if status == "COMPLETED":
            return "parse.partial_success" if outcome(job.name) == "torn" else "parse.success"
        return EVENTS[status]

    def job_body(self, job: ParseJob) -> dict[str, Any]:
        status = self.status(job)
        stamp = _iso(job.started)
        return {
            "id": job.id, "project_id": job.project_id, "status": status, "created_at": stamp,
            "updated_at": _iso(self.clock()) if status != "PENDING" else stamp,
            "error_message": "Document could not be parsed: the file is corrupted"
            if status == "FAILED" else None,
            "name": job.name, "tier": job.tier, "user_metadata": job.user_metadata or None,
            "usage": {"credits": 3.0 * PAGES} if status == "COMPLETED" else None,
        }  # fmt: skip

    def payload(self, job: ParseJob) -> dict[str, Any]:
        """What a webhook about the job's current status says (decoded)."""
        return {
            "event_id": str(uuid.uuid4()),
            "event_type": self.event(job),
            "timestamp": _iso(self.clock()),
            "data": self.job_body(job),
        }

    def content(self, job: ParseJob, expand: set[str]) -> dict[str, Any]:
        pages: list[dict[str, Any]] = []
        for n in range(1, PAGES + 1):
            if n == PAGES and outcome(job.name) == "torn":
                error = "Page could not be parsed: the page is damaged"
                pages.append({"page_number": n, "success": False, "error": error})
            else:
                pages.append({"page_number": n, "success": True,
                              "markdown": f"# {job.name}\n\nPage {n} of {PAGES}."})  # fmt: skip
        good = [p for p in pages if p["success"]]
        answer: dict[str, Any] = {}
        if "markdown" in expand:
            answer["markdown"] = {"pages": pages}
        if "markdown_full" in expand:
            answer["markdown_full"] = "\n\n".join(p["markdown"] for p in good)
        if "text" in expand:
            texts = [{"page_number": p["page_number"], "text": p["markdown"].replace("# ", "")}
                     for p in good]  # fmt: skip
            answer["text"] = {"pages": texts}
        if "text_full" in expand:
            answer["text_full"] = "\n\n".join(p["markdown"].replace("# ", "") for p in good)
        if "items" in expand:
            answer["items"] = {"pages": [
                {"page_number": p["page_number"], "page_width": 612.0, "page_height": 792.0,
                 "success": True, "items": [{"type": "text", "value": p["markdown"],
                                             "md": p["markdown"]}]}
                if p["success"] else p for p in pages]}  # fmt: skip
        if "metadata" in expand:
            answer["metadata"] = {"pages": [{"page_number": p["page_number"], "confidence": 0.97}
                                            for p in good]}  # fmt: skip
        return answer

    async def _create(self, request: Request) -> Response:
        raw = await request.body()
        if (refused := self._gate(request)) is not None:
            return refused
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return self._invalid(request, "body", "the body must be a JSON object")
        source = body.get("source_url") or body.get("file_id")
        if not isinstance(source, str) or not source:
            return self._invalid(request, "source_url", "give source_url or file_id")
        return await self._start(request, body, source.rsplit("/", 1)[-1])

    async def _upload(self, request: Request) -> Response:
        parts = await form_parts(request)
        if (refused := self._gate(request)) is not None:
            return refused
        fields = {p.name: p for p in parts or ()}
        upload = fields.get("file")
        if upload is None:
            return self._invalid(request, "file", "a multipart 'file' field is required")
        try:
            config = json.loads(fields["configuration"].text) if "configuration" in fields else {}
        except ValueError:
            config = None
        if not isinstance(config, dict):
            return self._invalid(request, "configuration", "configuration must be JSON")
        return await self._start(request, config, upload.filename or "document")

    async def _start(self, request: Request, body: dict[str, Any], name: str) -> Response:
        tier, version = body.get("tier"), body.get("version")
        if tier not in TIERS:
            return self._invalid(request, "tier", f"tier must be one of {', '.join(TIERS)}")
        if not isinstance(version, str) or not version:
            return self._invalid(request, "version", "version is required ('latest')")
        hooks = body.get("webhook_configurations") or []
        if not isinstance(hooks, list) or not all(
            isinstance(h, dict) and isinstance(h.get("webhook_url"), str) for h in hooks
        ):
            return self._invalid(request, "webhook_configurations", "each needs a webhook_url")
        for hook in hooks:
            if hook.get("webhook_output_format") not in (None, "json", "string"):
                return self._invalid(request, "webhook_output_format", "'json' or 'string'")
        metadata = body.get("user_metadata")
        job = ParseJob(
            str(uuid.uuid4()), self.clock(), name, tier,
            user_metadata={str(k): str(v) for k, v in metadata.items()}
            if isinstance(metadata, dict) else {},
            webhooks=hooks,
        )  # fmt: skip
        self.jobs[job.id] = job
        return self.answer(request, JSONResponse(self.job_body(job)))

    async def _job(self, request: Request) -> Response:
        job = self._find(request)
        if isinstance(job, Response):
            return job
        expand = {
            word.strip()
            for given in request.query_params.getlist("expand")
            for word in given.split(",")
            if word.strip()
        }
        answer: dict[str, Any] = {"job": self.job_body(job)}
        wanted = expand & set(CONTENT)
        if wanted and self.status(job) == "COMPLETED":
            if self.gone(job.started + self.duration):
                return self.refuse(request, 404, {"detail": "Job results not found or expired"})
            answer.update(self.content(job, wanted))
        return self.answer(request, JSONResponse(answer))

    async def _cancel(self, request: Request) -> Response:
        job = self._find(request)
        if isinstance(job, Response):
            return job
        if self.status(job) in ("PENDING", "RUNNING"):
            job.cancelled = True
        return self.answer(request, JSONResponse(self.job_body(job)))

    async def _list(self, request: Request) -> Response:
        if (refused := self._gate(request)) is not None:
            return refused
        wanted = request.query_params.get("status")
        items = [self.job_body(j) for j in self.jobs.values()
                 if wanted is None or self.status(j) == wanted]  # fmt: skip
        return self.answer(request, JSONResponse({"items": items, "next_page_token": None}))

    def _gate(self, request: Request) -> Response | None:
        return self.gate(request, bearer(request))

    def _invalid(self, request: Request, where: str, message: str) -> Response:
        detail = [{"loc": ["body", where], "msg": message, "type": "value_error"}]
        return self.refuse(request, 422, {"detail": detail})

    def _find(self, request: Request) -> ParseJob | Response:
        if (refused := self._gate(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["job_id"])
        return job if job is not None else self.refuse(request, 404, {"detail": "Job not found"})

    def deliveries(self, job: ParseJob) -> list[Delivery]:
        """The webhook POSTs the job's current status makes, one per configuration that
        listens for its event. Each event is announced once."""
        event = self.event(job)
        if event in job.announced:
            return []
        job.announced.add(event)
        out = []
        payload = self.payload(job)
        for hook in job.webhooks:
            events = hook.get("webhook_events")
            if isinstance(events, list) and event not in events:
                continue
            text = json.dumps(payload)
            body = text if hook.get("webhook_output_format") == "json" else json.dumps(text)
            data = body.encode()
            given = hook.get("webhook_headers")
            headers = {str(k): str(v) for k, v in given.items()} if isinstance(given, dict) else {}
            headers["Content-Type"] = "application/json"
            secret = hook.get("webhook_signing_secret")
            if isinstance(secret, str) and secret:
                digest = hmac.new(secret.encode(), data, hashlib.sha256).hexdigest()
                headers["LC-Signature"] = f"sha256={digest}"
            out.append(Delivery(hook["webhook_url"], event, headers, data))
        return out

    def announce(self, client: httpx.AsyncClient, tasks: set[asyncio.Task[None]]) -> None:
        """Send the webhooks of every job whose status changed since the last look."""
        for job in list(self.jobs.values()):
            for delivery in self.deliveries(job):
                task = asyncio.create_task(self._deliver(client, delivery))
                tasks.add(task)
                task.add_done_callback(tasks.discard)

    async def _deliver(self, client: httpx.AsyncClient, delivery: Delivery) -> None:
        for attempt in range(DELIVERY_ATTEMPTS):
            try:
                answer = await client.post(
                    delivery.url, headers=delivery.headers, content=delivery.body
                )
                status: int | None = answer.status_code
            except httpx.HTTPError:
                status = None
            self.sent.append(Sent(delivery.url, delivery.event, delivery.headers,
                                  delivery.body, status))  # fmt: skip
            if status is not None and status < 300:
                return
            await asyncio.sleep(0.2 * 2**attempt)

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncIterator[None]:
        async with httpx.AsyncClient(timeout=10.0, trust_env=False) as client:
            sending: set[asyncio.Task[None]] = set()

            async def tick() -> None:
                while True:
                    self.announce(client, sending)
                    await asyncio.sleep(TICK)

            ticker = asyncio.create_task(tick())
            try:
                yield
            finally:
                for task in (ticker, *sending):
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z")


def build(options: CloudOptions) -> Starlette:
    """The app ``jobhook simulate --provider llamaparse`` serves."""
    require_key(options, "llamaparse")
    sim = LlamaParseSim(api_key=options.api_key, duration=options.duration,
                        requests_per_minute=options.requests_per_minute or 600.0,
                        public_url=options.public_url)  # fmt: skip
    return sim.app()
