"""The dispatcher: leases resolved completions' deliveries and runs each matching handler.

One loop step (``run_once``) claims as much due work as there are free slots: completions to
resolve (once each, for all their handlers) and (completion, handler) dispatches to deliver.
It wakes on commit (``wake``), not on a timer; the timer only covers retries falling due,
and leases left behind by a process that died. Each handler holds at most its
``max_concurrency`` slots: a handler at its limit is left out of the claim, so a destination
that hangs holds its share and the others keep flowing.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from receiver import tracing
from receiver.backoff import backoff_delay
from receiver.completion import Completion, ResultInfo
from receiver.errors import JobhookError, ResultDiskFullError, RetryableError
from receiver.loops import wait_either, worker_id
from receiver.pipeline import failures
from receiver.pipeline.circuit import Circuits
from receiver.pipeline.resolver import ref_from_json
from receiver.store import Resolution

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine, Mapping
    from typing import Any

    from receiver.completion import Handler
    from receiver.config.settings import HandlerSettings
    from receiver.pipeline.resolver import Resolver
    from receiver.store import CompletionRow, DispatchRow, Engine

log = structlog.get_logger(__name__)
IDLE_RECHECK_SECONDS = 5.0
DISK_FULL_RECHECK_SECONDS = 30.0
"""How often a completion waiting for space in ``results.dir`` tries again, at most."""


def default_limit(concurrency: int) -> int:
    """A handler's share of the dispatch slots when it sets no ``max_concurrency``."""
    return max(concurrency // 2, 1)


def completion_of(row: CompletionRow, fields: dict[str, float | None] | None = None) -> Completion:
    """The completion handlers see, from the store's row and the result's ``fields``."""
    result = None
    if row.result_path and row.result_sha256 is not None and row.result_bytes is not None:
        result = ResultInfo(Path(row.result_path), row.result_sha256, row.result_bytes)
    return Completion(
        row.id,
        row.source,
        row.job_id,
        row.state,
        row.provider_status,
        row.metadata,
        row.error,
        result,
        row.created_at,
        row.error_code,
        fields or {},
    )


class Dispatcher:
    """Runs handlers for completions, each delivery tracked on its own: attempts, backoff, dead."""

    def __init__(
        self,
        store: Engine,
        handlers: Mapping[str, Handler],
        policies: Mapping[str, HandlerSettings],
        resolver: Resolver,
        *,
        concurrency: int = 8,
        lease_seconds: float = 60.0,
        max_resolve_attempts: int = 12,
        clock: Callable[[], float] = time.time,
        owner: str | None = None,
        on_delivered: Callable[[str, str, float], None] | None = None,
        on_resolved: Callable[[CompletionRow, Resolution], None] | None = None,
    ) -> None:
        self.store = store
        self.handlers = dict(handlers)
        self.policies = dict(policies)
        self.resolver = resolver
        self.concurrency = concurrency
        self.lease_seconds = lease_seconds
        self.max_resolve_attempts = max_resolve_attempts
        self.owner = owner or worker_id()
        self._clock = clock
        self._wakeup = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._on_delivered = on_delivered
        self._on_resolved = on_resolved
        self.circuits = Circuits(store, clock)
        self.limits = {
            name: policy.max_concurrency or default_limit(concurrency)
            for name, policy in self.policies.items()
        }
        self._running: Counter[str] = Counter()

    def wake(self) -> None:
        """New work was committed: look for it now."""
        self._wakeup.set()

    async def probe(self, handler: str, wait: float) -> str | None:
        """Replayed deliveries of ``handler`` wait on an open circuit: send its one probe now
        and wait up to ``wait`` seconds for its outcome (``Circuits.probe_outcome``); None when the
        circuit is closed."""
        asked = self._clock()
        if await self.circuits.probe_now(handler, asked) is None:
            return None
        self.wake()
        return await self.circuits.probe_outcome(handler, asked, wait)

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    async def run_once(self) -> int:
        """Claim due work for every free slot and start it; return how much was started."""
        free = self.concurrency - len(self._tasks)
        if free <= 0:
            return 0
        await self.circuits.refresh()
        now = self._clock()
        completions = await self.store.claim_completions(self.owner, free, self.lease_seconds, now)
        for row in completions:
            self._spawn(self._resolve(row))
        free -= len(completions)
        pairs: list[tuple[DispatchRow, CompletionRow]] = []
        if free > 0:
            busy = self.busy()
            # No claim may take more of a handler's work than it has room for.
            rooms = [self.limits[h] - self._running[h] for h in self.limits if h not in busy]
            limit = min([free, *rooms])
            pairs = await self.store.claim_dispatches(
                self.owner, limit, self.lease_seconds, now, busy
            )
            for dispatch, completion in pairs:
                self._running[dispatch.handler] += 1
                self._spawn(self._deliver(dispatch, completion), dispatch.handler)
        return len(completions) + len(pairs)

    def busy(self) -> list[str]:
        """The handlers holding every slot they may: none of their work is claimed now."""
        return sorted(h for h, limit in self.limits.items() if self._running[h] >= limit)

    async def run(self, stop: asyncio.Event, grace: float = 10.0) -> None:
        """Repeat ``run_once`` until ``stop``; then finish in-flight work within ``grace``."""
        renewer = asyncio.create_task(self._renew_leases(stop), name="lease-renewer")
        try:
            while not stop.is_set():
                self._wakeup.clear()
                try:
                    started = await self.run_once()
                except Exception as exc:
                    log.error("dispatch_step_failed", error=str(exc))
                    started = 0
                    await wait_either(stop, self._wakeup, 1.0)
                    continue
                if started and len(self._tasks) < self.concurrency:
                    continue
                await wait_either(stop, self._wakeup, await self._idle_timeout())
        finally:
            renewer.cancel()
            await self._drain(grace)

    async def _idle_timeout(self) -> float:
        if len(self._tasks) >= self.concurrency:
            return IDLE_RECHECK_SECONDS  # a finishing task wakes us sooner
        try:
            due = await self.store.next_due(self.busy())
        except JobhookError:
            return 1.0
        if due is None:
            return IDLE_RECHECK_SECONDS
        return min(max(due - self._clock(), 0.0), IDLE_RECHECK_SECONDS)

    async def _drain(self, grace: float) -> None:
        if self._tasks:
            log.info("dispatch_draining", in_flight=len(self._tasks), grace=grace)
            _, pending = await asyncio.wait(self._tasks, timeout=grace)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=5)
        try:
            released = await self.store.release(self.owner)
        except JobhookError as exc:
            log.warning("lease_release_failed", error=str(exc))
            return
        if released:
            log.info("leases_released", count=released)

    async def _renew_leases(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await wait_either(stop, asyncio.Event(), self.lease_seconds / 3)
            if self._tasks and not stop.is_set():
                try:
                    await self.store.renew(self.owner, self._clock() + self.lease_seconds)
                except JobhookError as exc:
                    log.warning("lease_renew_failed", error=str(exc))

    def _spawn(self, coro: Coroutine[Any, Any, None], handler: str | None = None) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        if handler is not None:
            task.add_done_callback(lambda _: self._slot_freed(handler))
        task.add_done_callback(self._done)

    def _slot_freed(self, handler: str) -> None:
        self._running[handler] -= 1
        if self._running[handler] <= 0:
            del self._running[handler]

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._wakeup.set()
        if not task.cancelled() and task.exception() is not None:
            log.error("dispatch_task_crashed", error=repr(task.exception()))

    async def _resolve(self, row: CompletionRow) -> None:
        with tracing.span("jobhook.resolve", parent=row.traceparent, attributes={
            "jobhook.source": row.source, "jobhook.job.id": row.job_id,
            "jobhook.attempt": row.attempts,
        }):  # fmt: skip
            await self._resolve_once(row)

    async def _resolve_once(self, row: CompletionRow) -> None:
        bound = log.bind(source=row.source, job_id=row.job_id)
        started = time.monotonic()
        try:
            resolution = await self.resolver.resolve(row, ref_from_json(row.result_ref))
            resolution = replace(resolution, seconds=time.monotonic() - started)
        except Exception as exc:  # any failure of a step is retried, never lost
            # A full results disk is jobhook's own trouble, not the job's: it never uses up the
            # completion's attempts, and space coming back is noticed within half a minute.
            disk_full = isinstance(exc, ResultDiskFullError)
            if row.attempts < self.max_resolve_attempts or disk_full:
                retry_after = exc.retry_after if isinstance(exc, RetryableError) else None
                ceiling = DISK_FULL_RECHECK_SECONDS if disk_full else 600.0
                delay = max(backoff_delay(row.attempts, 2.0, ceiling), retry_after or 0.0)
                bound.warning(
                    "resolve_retry", attempt=row.attempts, delay=round(delay, 2), error=str(exc)
                )
                await self.store.retry_completion(
                    row.id, self.owner, str(exc), self._clock() + delay
                )
                return
            bound.error("resolve_gave_up", attempts=row.attempts, error=str(exc))
            code, where = failures.resolve_failure(exc)
            resolution = Resolution(
                error=f"result could not be resolved: {exc}", error_code=code, error_where=where
            )
        if not await self.store.resolve_completion(row.id, self.owner, resolution):
            bound.warning("resolve_lease_lost")  # another replica resolves it now
            return
        if self._on_resolved is not None:
            self._on_resolved(row, resolution)
        bound.info("completion_resolved", bytes=resolution.result_bytes, error=resolution.error)
        self.wake()

    async def _fields(self, row: CompletionRow) -> dict[str, float | None]:
        """The fields of a result that has them (one read; none for a job without a result)."""
        if row.result_path is None:
            return {}
        found = await self.store.fields_of([(row.source, row.job_id)])
        return {f.field: f.confidence for f in found.get((row.source, row.job_id), [])}

    async def _deliver(self, dispatch: DispatchRow, row: CompletionRow) -> None:
        with tracing.span(f"jobhook.deliver {dispatch.handler}", parent=row.traceparent,
                          attributes={"jobhook.source": row.source, "jobhook.job.id": row.job_id,
                                      "jobhook.handler": dispatch.handler,
                                      "jobhook.attempt": dispatch.attempts}) as span:  # fmt: skip
            outcome, error = await self._deliver_once(dispatch, row)
            span.set("jobhook.outcome", outcome)
            if error is not None:
                span.fail(error)

    async def _deliver_once(
        self, dispatch: DispatchRow, row: CompletionRow
    ) -> tuple[str, str | None]:
        """Run the handler once and record how it went: (outcome, error or None)."""
        bound = log.bind(
            source=row.source,
            job_id=row.job_id,
            handler=dispatch.handler,
            attempt=dispatch.attempts,
        )
        handler = self.handlers.get(dispatch.handler)
        policy = self.policies.get(dispatch.handler)
        if handler is None or policy is None:
            bound.error("dispatch_dead", error="handler is no longer configured")
            await self.store.finish_dispatch(
                dispatch.id,
                self.owner,
                error="handler is no longer configured",
                next_attempt_at=None,
                error_code="handler_missing",
            )
            return "dead", "handler is no longer configured"
        started = self._clock()
        error: str | None = None
        if self._on_delivered is not None:
            self._on_delivered(dispatch.handler, "started", started - row.created_at)
        try:
            await handler.handle(completion_of(row, await self._fields(row)))
        except Exception as exc:  # a handler raising means "retry later"
            code, error = failures.handler_failure(exc)
            if dispatch.attempts >= policy.max_attempts:
                bound.error("dispatch_dead", error=error, error_code=code)
                await self.store.finish_dispatch(
                    dispatch.id, self.owner, error=error, next_attempt_at=None, error_code=code
                )
                outcome = "dead"
            else:
                delay = backoff_delay(dispatch.attempts, policy.backoff_initial, policy.backoff_max)
                # The destination's Retry-After (the http handler reads it), within the cap.
                wanted = exc.retry_after if isinstance(exc, RetryableError) else None
                if wanted is not None:
                    delay = min(max(delay, wanted), policy.backoff_max)
                bound.warning("dispatch_retry", delay=round(delay, 2), error=error, error_code=code)
                await self.store.finish_dispatch(
                    dispatch.id,
                    self.owner,
                    error=error,
                    next_attempt_at=self._clock() + delay,
                    error_code=code,
                )
                outcome = "retry"
            await self.circuits.failed(dispatch.handler, policy)
        else:
            await self.store.finish_dispatch(
                dispatch.id, self.owner, error=None, next_attempt_at=None
            )
            bound.info("dispatch_succeeded", seconds=round(self._clock() - started, 4))
            outcome = "succeeded"
            await self.circuits.succeeded(dispatch.handler)
        if self._on_delivered is not None:
            self._on_delivered(dispatch.handler, outcome, self._clock() - started)
        return outcome, error
