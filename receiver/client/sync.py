"""``Client``: the admin API from blocking code, over one ``httpx.Client``."""

from __future__ import annotations

import time
from contextlib import contextmanager
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
    from collections.abc import Generator, Iterator, Mapping
    from datetime import datetime
    from types import TracebackType


class Client:
    """jobhook's admin API: track, look up, wait for and react to jobs.

    ``url`` and ``token`` default to ``JOBHOOK_URL`` and ``JOBHOOK_ADMIN_TOKEN``; ``timeout``
    is each request's (a long-poll's read waits for as long as it asked for). Use it as a
    context manager, or call ``close()``.
    """

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self._target = core.Target.resolve(url, token, environ)
        self._timeout = timeout
        self._http = httpx.Client(base_url=self._target.url, headers=self._target.headers(),
                                  timeout=timeout, transport=transport)  # fmt: skip

    @property
    def url(self) -> str:
        return self._target.url

    def __repr__(self) -> str:
        return f"Client(url={self.url!r})"

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _timeouts(self, call: core.Call) -> httpx.Timeout:
        return httpx.Timeout(self._timeout, read=call.read_timeout or self._timeout)

    def exchange(self, call: core.Call) -> tuple[int, Any]:
        """Send ``call``: its status and JSON document, or the mapped error."""
        try:
            response = self._http.request(
                call.method, call.path, params=tuple(call.params), json=call.body,
                headers=call.headers, timeout=self._timeouts(call),
            )  # fmt: skip
        except httpx.HTTPError as exc:
            raise TransportError(self.url, type(exc).__name__) from exc
        if response.status_code >= 400:
            raise self._error(response)
        return response.status_code, core.document(response.content)

    def send(self, call: core.Call) -> Any:
        """Send ``call``: the admin API's JSON document as it is, or the mapped error."""
        return self.exchange(call)[1]

    def _error(self, response: httpx.Response) -> JobhookError:
        given = self._target.token is not None
        return core.error_for(response.status_code, response.reason_phrase, response.content,
                              response.headers, token_given=given)  # fmt: skip

    @contextmanager
    def _stream(self, call: core.Call) -> Iterator[httpx.Response]:
        request = self._http.build_request(
            call.method, call.path, params=tuple(call.params), headers=call.headers,
            timeout=self._timeouts(call),
        )  # fmt: skip
        try:
            response = self._http.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise TransportError(self.url, type(exc).__name__) from exc
        try:
            if response.status_code >= 400:
                response.read()
                raise self._error(response)
            yield response
        except httpx.HTTPError as exc:
            raise TransportError(self.url, type(exc).__name__) from exc
        finally:
            response.close()

    def track(
        self, source: str, job_id: str, *, metadata: Mapping[str, Any] | None = None,
        pages: int | None = None,
    ) -> Job:  # fmt: skip
        """Register a job just submitted to its provider, so jobhook watches (and polls) it."""
        doc = self.send(core.track(source, job_id, metadata or {}, pages))
        return core.parse(Tracked, doc).job

    def get(self, source: str, job_id: str) -> JobDetail:
        """The job with its deliveries, completion and handlers' dispatches; NotFound if unknown."""
        return core.parse(JobDetail, self.send(core.get_job(source, job_id)))

    def page(
        self, *, limit: int = 50, cursor: str | None = None, **filters: Unpack[core.Filters]
    ) -> Page:
        """One page of jobs, newest first; pass its ``next_cursor`` for the next."""
        call = core.list_jobs(core.filter_params(filters), limit, cursor)
        return core.parse(Page, self.send(call))

    def list(self, *, page_size: int = 50, **filters: Unpack[core.Filters]) -> Generator[Job]:
        """Every job the filters select, newest first, fetched a page at a time."""
        params = core.filter_params(filters)
        cursor: str | None = None
        while True:
            page = core.parse(Page, self.send(core.list_jobs(params, page_size, cursor)))
            yield from page.jobs
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def wait(
        self, source: str, job_id: str, *, timeout: float | None = None,
        poll: float = core.LONG_POLL_SECONDS,
    ) -> JobDetail:  # fmt: skip
        """The job once terminal. Long-polls ``poll`` seconds at a time, riding out restarts,
        dropped connections and 5xx with bounded backoff; WaitTimeout after ``timeout``."""
        plan = core.WaitPlan(source, job_id, timeout, poll)
        while True:
            call = plan.next_call()
            try:
                status, doc = self.exchange(call)
            except JobhookError as exc:
                time.sleep(plan.failed(exc))
                continue
            if (detail := plan.answered(status, doc)) is not None:
                return detail

    def events(
        self, *, last_event_id: int | None = None, heartbeat: float = core.DEFAULT_HEARTBEAT,
        give_up_after: float | None = 300.0,
    ) -> Generator[Completion]:  # fmt: skip
        """Completions as jobs become terminal, from after ``last_event_id`` (None: from now).

        Reconnects with ``Last-Event-ID`` whenever the stream breaks or the service restarts,
        so no completion is missed or repeated; raises once reconnecting has failed for
        ``give_up_after`` seconds in a row. Each completion's ``id`` is where to resume.
        """
        plan = core.EventsPlan(last_event_id, heartbeat, give_up_after)
        while True:
            failure: JobhookError | None = None
            try:
                with self._stream(plan.call()) as response:
                    for line in response.iter_lines():
                        if (completion := plan.line(line)) is not None:
                            yield completion
            except JobhookError as exc:
                failure = exc
            time.sleep(plan.failed(failure))

    def replay(
        self, source: str, job_id: str, *, handler: str | None = None,
        include_succeeded: bool = False,
    ) -> int:  # fmt: skip
        """Queue the job's dead handler deliveries again (or every one's); how many were."""
        doc = self.send(core.replay(source, job_id, handler, include_succeeded))
        return core.parse(Replayed, doc).requeued

    def reprocess(self, source: str, job_id: str, *, force: bool = False) -> ReprocessOutcome:
        """Submit a finished job again at its provider (once, unless ``force``)."""
        return core.parse(ReprocessOutcome, self.send(core.reprocess(source, job_id, force)))

    def audit(
        self, *, token: str | None = None, action: str | None = None,
        after: datetime | float | str | None = None, before: datetime | float | str | None = None,
        page_size: int = 50,
    ) -> Generator[AuditEntry]:  # fmt: skip
        """The audit trail, newest first, fetched a page at a time (an ``admin`` token's):
        who did what, when and from where, and the refused attempts."""
        params = core.audit_params(token, action, after, before)
        cursor: str | None = None
        while True:
            page = core.parse(AuditPage, self.send(core.audit(params, page_size, cursor)))
            yield from page.entries
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def stats(self, period: str = "24h") -> Stats:
        """The period's figures: ``24h``, ``7d`` or ``30d``."""
        return core.parse(Stats, self.send(core.stats(period)))

    def status(self) -> dict[str, Any]:
        """The service's status as ``GET /status`` answers it (the document ``jobhook status``
        shows: readiness, store, sources with their budgets and backlog, handlers' circuits)."""
        doc: dict[str, Any] = self.send(core.service_status())
        return doc

    def export(
        self, *, format: str = "jsonl", include_result: bool = False,
        fields: builtins.list[str] | None = None, **filters: Unpack[core.Filters],
    ) -> Generator[str]:  # fmt: skip
        """The export (``jsonl`` or ``csv``) as text as it streams; joined, the whole file."""
        call = core.export(core.filter_params(filters), format, include_result,
                           ",".join(fields) if fields else None)  # fmt: skip
        yield from self.stream_text(call)

    def stream_text(self, call: core.Call) -> Generator[str]:
        """Send ``call`` and yield its answer's text as it streams, or raise the mapped error."""
        with self._stream(call) as response:
            yield from response.iter_text()
