"""``AsyncClient``: the admin API from asyncio code, over one ``httpx.AsyncClient``; the same
methods as ``Client`` (receiver.client.sync), awaited."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Unpack

import httpx

from receiver.client import core
from receiver.client.errors import JobhookError, TransportError
from receiver.client.models import (
    AuditEntry,
    AuditPage,
    Completion,
    Job,
    JobDetail,
    Page,
    Replayed,
    ReprocessOutcome,
    Stats,
    Tracked,
)

if TYPE_CHECKING:
    import builtins
    from collections.abc import AsyncGenerator, AsyncIterator, Mapping
    from datetime import datetime
    from types import TracebackType


class AsyncClient:
    """jobhook's admin API: track, look up, wait for and react to jobs.

    ``url`` and ``token`` default to ``JOBHOOK_URL`` and ``JOBHOOK_ADMIN_TOKEN``; ``timeout``
    is each request's (a long-poll's read waits for as long as it asked for). Use it as a
    context manager, or call ``aclose()``.
    """

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self._target = core.Target.resolve(url, token, environ)
        self._timeout = timeout
        self._http = httpx.AsyncClient(base_url=self._target.url, headers=self._target.headers(),
                                  timeout=timeout, transport=transport)  # fmt: skip

    @property
    def url(self) -> str:
        return self._target.url

    def __repr__(self) -> str:
        return f"AsyncClient(url={self.url!r})"

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    def _timeouts(self, call: core.Call) -> httpx.Timeout:
        return httpx.Timeout(self._timeout, read=call.read_timeout or self._timeout)

    async def exchange(self, call: core.Call) -> tuple[int, Any]:
        """Send ``call``: its status and JSON document, or the mapped error."""
        try:
            response = await self._http.request(
                call.method, call.path, params=tuple(call.params), json=call.body,
                headers=call.headers, timeout=self._timeouts(call),
            )  # fmt: skip
        except httpx.HTTPError as exc:
            raise TransportError(self.url, type(exc).__name__) from exc
        if response.status_code >= 400:
            raise self._error(response)
        return response.status_code, core.document(response.content)

    async def send(self, call: core.Call) -> Any:
        """Send ``call``: the admin API's JSON document as it is, or the mapped error."""
        return (await self.exchange(call))[1]

    def _error(self, response: httpx.Response) -> JobhookError:
        given = self._target.token is not None
        return core.error_for(response.status_code, response.reason_phrase, response.content,
                              response.headers, token_given=given)  # fmt: skip

    @asynccontextmanager
    async def _stream(self, call: core.Call) -> AsyncIterator[httpx.Response]:
        request = self._http.build_request(
            call.method, call.path, params=tuple(call.params), headers=call.headers,
            timeout=self._timeouts(call),
        )  # fmt: skip
        try:
            response = await self._http.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise TransportError(self.url, type(exc).__name__) from exc
        try:
            if response.status_code >= 400:
                await response.aread()
                raise self._error(response)
            yield response
        except httpx.HTTPError as exc:
            raise TransportError(self.url, type(exc).__name__) from exc
        finally:
            await response.aclose()

    async def track(
        self, source: str, job_id: str, *, metadata: Mapping[str, Any] | None = None,
        pages: int | None = None,
    ) -> Job:  # fmt: skip
        """Register a job just submitted to its provider, so jobhook watches (and polls) it."""
        doc = await self.send(core.track(source, job_id, metadata or {}, pages))
        return core.parse(Tracked, doc).job

    async def get(self, source: str, job_id: str) -> JobDetail:
        """The job with its deliveries, completion and handlers' dispatches; NotFound if unknown."""
        return core.parse(JobDetail, await self.send(core.get_job(source, job_id)))

    async def page(
        self, *, limit: int = 50, cursor: str | None = None, **filters: Unpack[core.Filters]
    ) -> Page:
        """One page of jobs, newest first; pass its ``next_cursor`` for the next."""
        call = core.list_jobs(core.filter_params(filters), limit, cursor)
        return core.parse(Page, await self.send(call))

    async def list(
        self, *, page_size: int = 50, **filters: Unpack[core.Filters]
    ) -> AsyncGenerator[Job]:
        """Every job the filters select, newest first, fetched a page at a time."""
        params = core.filter_params(filters)
        cursor: str | None = None
        while True:
            page = core.parse(Page, await self.send(core.list_jobs(params, page_size, cursor)))
            for job in page.jobs:
                yield job
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def wait(
        self, source: str, job_id: str, *, timeout: float | None = None,  # noqa: ASYNC109
        poll: float = core.LONG_POLL_SECONDS,
    ) -> JobDetail:  # fmt: skip
        """The job once terminal. Long-polls ``poll`` seconds at a time, riding out restarts,
        dropped connections and 5xx with bounded backoff; WaitTimeout after ``timeout``."""
        plan = core.WaitPlan(source, job_id, timeout, poll)
        while True:
            call = plan.next_call()
            try:
                status, doc = await self.exchange(call)
            except JobhookError as exc:
                await asyncio.sleep(plan.failed(exc))
                continue
            if (detail := plan.answered(status, doc)) is not None:
                return detail

    async def events(
        self, *, last_event_id: int | None = None, heartbeat: float = core.DEFAULT_HEARTBEAT,
        give_up_after: float | None = 300.0,
    ) -> AsyncGenerator[Completion]:  # fmt: skip
        """Completions as jobs become terminal, from after ``last_event_id`` (None: from now).

        Reconnects with ``Last-Event-ID`` whenever the stream breaks or the service restarts,
        so no completion is missed or repeated; raises once reconnecting has failed for
        ``give_up_after`` seconds in a row. Each completion's ``id`` is where to resume.
        """
        plan = core.EventsPlan(last_event_id, heartbeat, give_up_after)
        while True:
            failure: JobhookError | None = None
            try:
                async with self._stream(plan.call()) as response:
                    async for line in response.aiter_lines():
                        if (completion := plan.line(line)) is not None:
                            yield completion
            except JobhookError as exc:
                failure = exc
            await asyncio.sleep(plan.failed(failure))

    async def replay(
        self, source: str, job_id: str, *, handler: str | None = None,
        include_succeeded: bool = False,
    ) -> int:  # fmt: skip
        """Queue the job's dead handler deliveries again (or every one's); how many were."""
        doc = await self.send(core.replay(source, job_id, handler, include_succeeded))
        return core.parse(Replayed, doc).requeued

    async def reprocess(self, source: str, job_id: str, *, force: bool = False) -> ReprocessOutcome:
        """Submit a finished job again at its provider (once, unless ``force``)."""
        return core.parse(ReprocessOutcome, await self.send(core.reprocess(source, job_id, force)))

    async def audit(
        self, *, token: str | None = None, action: str | None = None,
        after: datetime | float | str | None = None, before: datetime | float | str | None = None,
        page_size: int = 50,
    ) -> AsyncGenerator[AuditEntry]:  # fmt: skip
        """The audit trail, newest first, fetched a page at a time (an ``admin`` token's):
        who did what, when and from where, and the refused attempts."""
        params = core.audit_params(token, action, after, before)
        cursor: str | None = None
        while True:
            page = core.parse(AuditPage, await self.send(core.audit(params, page_size, cursor)))
            for entry in page.entries:
                yield entry
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def stats(self, period: str = "24h") -> Stats:
        """The period's figures: ``24h``, ``7d`` or ``30d``."""
        return core.parse(Stats, await self.send(core.stats(period)))

    async def status(self) -> dict[str, Any]:
        """The service's status as ``GET /status`` answers it (the document ``jobhook status``
        shows: readiness, store, sources with their budgets and backlog, handlers' circuits)."""
        doc: dict[str, Any] = await self.send(core.service_status())
        return doc

    async def export(
        self, *, format: str = "jsonl", include_result: bool = False,
        fields: builtins.list[str] | None = None, **filters: Unpack[core.Filters],
    ) -> AsyncGenerator[str]:  # fmt: skip
        """The export (``jsonl`` or ``csv``) as text as it streams; joined, the whole file."""
        call = core.export(core.filter_params(filters), format, include_result,
                           ",".join(fields) if fields else None)  # fmt: skip
        async for chunk in self.stream_text(call):
            yield chunk

    async def stream_text(self, call: core.Call) -> AsyncGenerator[str]:
        """Send ``call`` and yield its answer's text as it streams, or raise the mapped error."""
        async with self._stream(call) as response:
            async for chunk in response.aiter_text():
                yield chunk
