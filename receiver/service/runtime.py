"""The running service's resources, opened in order and closed in reverse by the lifespan."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from typing import TYPE_CHECKING

import httpx
import structlog

from handlers import load_handler
from receiver.admin.notifier import Notifier
from receiver.intake.direct import DirectHints
from receiver.intake.ingest import Ingestor
from receiver.intake.poller import Poller
from receiver.loops import worker_id
from receiver.ops.metrics import RuntimeCounts
from receiver.ops.quality import JobOutcomes
from receiver.ops.retention import Retention
from receiver.pipeline import egress
from receiver.pipeline.dispatcher import Dispatcher
from receiver.pipeline.drain import DrainWatch
from receiver.pipeline.fetch import ResultFetcher
from receiver.pipeline.heartbeat import Heartbeat
from receiver.pipeline.reprocess import Reprocessor
from receiver.pipeline.resolver import Resolver
from receiver.providers import get_provider
from receiver.providers.jobapi import JobAPI
from receiver.providers.ratelimit import RateLimiter, default_budget
from receiver.secret import Secret
from receiver.signatures.base import AsyncVerifier
from receiver.store import Store, open_store

if TYPE_CHECKING:
    from collections.abc import Mapping

    from receiver.completion import Handler
    from receiver.config.settings import Settings
    from receiver.intake.webhooks import Source
    from receiver.models import Event, IngestResult
    from receiver.ops.metrics import Metrics
    from receiver.providers import Provider
    from receiver.store import CompletionRow, Resolution

log = structlog.get_logger(__name__)
USABLE = ("succeeded", "partial")
"""States whose completion should carry a result."""


def load_handlers(settings: Settings) -> dict[str, Handler]:
    """Every configured handler, built now so a bad one stops startup with its name."""
    return {entry.name: load_handler(entry) for entry in settings.handlers}


class Runtime:
    """Store, HTTP clients, job APIs, handlers, dispatcher: everything a lifespan owns."""

    def __init__(
        self,
        settings: Settings,
        handlers: dict[str, Handler],
        store: Store | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.settings = settings
        self.handlers = handlers
        self.store = (
            store
            if store is not None
            else open_store(
                settings.store.url,
                require_synchronous_replication=settings.store.require_synchronous_replication,
            )
        )
        self._stack = contextlib.AsyncExitStack()
        self._stop = asyncio.Event()
        self.apis: dict[str, JobAPI] = {}
        self._verifier_clients: dict[str, httpx.AsyncClient] = {}
        self.metrics = metrics
        self.notifier = Notifier()
        self.outcomes: JobOutcomes | None = None
        self.owner = worker_id()
        """This replica's name on every claim and lease it takes, and on its heartbeat."""

    async def start(self) -> None:
        """Open everything; on failure, close what was opened and re-raise."""
        settings = self.settings
        stack = self._stack
        try:
            outbound = egress.Egress.from_settings(settings.egress)
            egress.configure(outbound)
            await self.store.open()
            stack.push_async_callback(self.store.close)
            api_client = httpx.AsyncClient(
                timeout=httpx.Timeout(15.0, connect=settings.results.connect_timeout),
                headers={"User-Agent": "jobhook"},
                follow_redirects=False,
                **outbound.client_options(),
            )
            stack.push_async_callback(api_client.aclose)
            self.egress = outbound
            providers: dict[str, Provider] = {}
            for name, cfg in settings.sources.items():
                provider = providers[name] = get_provider(
                    cfg.provider, cfg.table, api_version=cfg.api_version
                )
                base_url = cfg.api_base_url or provider.default_api_base_url()
                # A provider with its own job API signs its requests itself (no api_key).
                if base_url and (cfg.api_key or provider.job_api_class is not None):
                    configured = cfg.poll.requests_per_minute
                    limiter = RateLimiter(
                        configured or default_budget(cfg.provider),
                        name=name,
                        learn=True,
                        ceiling=configured,
                    )
                    self.apis[name] = (provider.job_api_class or JobAPI)(
                        source=name,
                        provider=provider,
                        base_url=base_url,
                        api_key=cfg.api_key or Secret(""),
                        client=api_client,
                        limiter=limiter,
                    )
                else:
                    log.warning(
                        "no_job_api",
                        source=name,
                        hint="set api_base_url and api_key to fetch results and poll",
                    )
            fetcher = self.fetcher = ResultFetcher(settings.results, egress=outbound)
            stack.push_async_callback(fetcher.aclose)
            self.retention = Retention(
                self.store,
                settings.retention,
                settings.results.dir,
                on_purged=None if self.metrics is None else self.metrics.purged_now,
            )
            for handler in self.handlers.values():
                start = getattr(handler, "start", None)
                if start is not None:
                    await start()
                close = getattr(handler, "close", None)
                if close is not None:
                    stack.push_async_callback(close)
            if self.metrics is not None:
                self.outcomes = JobOutcomes(
                    self.store, self.metrics.quality, self.metrics.source_label
                )
                stack.push_async_callback(self.outcomes.close)
            self.dispatcher = Dispatcher(
                self.store,
                self.handlers,
                {h.name: h for h in settings.handlers},
                Resolver(
                    dict(self.apis),
                    fetcher,
                    settings.results.dir,
                    store=self.store,
                    providers=providers,
                ),
                concurrency=settings.dispatch.concurrency,
                lease_seconds=settings.dispatch.lease_seconds,
                owner=self.owner,
                on_delivered=self._delivered,
                on_resolved=self._resolved,
            )
            self.heartbeat = Heartbeat(
                self.store,
                self.owner,
                settings.dispatch.heartbeat_seconds,
                on_taken_back=self.dispatcher.wake,
            )
            polling = {
                name: settings.sources[name].poll
                for name in self.apis
                if settings.sources[name].poll.enabled
            }
            self.ingestor = Ingestor(
                self.store,
                settings.handlers,
                wake=self.dispatcher.wake,
                resolving=set(self.apis),
                polling=polling,
                notify=self.notifier.notify,
                on_finished=self._finished,
            )
            self.poller = Poller(self.store, self.ingestor, self.apis, polling, owner=self.owner)
            self.reprocessor = Reprocessor(self.store, dict(self.apis), providers,
                                           self.ingestor.ingest, owner=self.owner)  # fmt: skip
            self.drain = DrainWatch(
                self.store, dict(self.apis), settings.dispatch.confirmation_drain_seconds
            )
            await self.drain.check()  # /readyz tells the backlog from the start
            watch = asyncio.create_task(self.drain.run(self._stop), name="drain-watch")
            stack.push_async_callback(self._stop_task, watch)
            beats = asyncio.create_task(self.heartbeat.run(self._stop), name="heartbeat")
            stack.push_async_callback(self._stop_task, beats)
            budgets = {
                name: cfg.direct_unknown_per_minute
                for name, cfg in settings.sources.items()
                if cfg.webhook_mode == "direct"
            }
            self.hints = DirectHints(self.store, self.ingestor, self.apis, budgets)
            task = asyncio.create_task(
                self.dispatcher.run(self._stop, settings.server.shutdown_grace_seconds),
                name="dispatcher",
            )
            stack.push_async_callback(self._stop_task, task)
            poller = asyncio.create_task(self.poller.run(self._stop), name="poller")
            stack.push_async_callback(self._stop_task, poller)
            if budgets:
                hinted = asyncio.create_task(self.hints.run(self._stop), name="direct_hints")
                stack.push_async_callback(self._stop_task, hinted)
            purger = asyncio.create_task(self.retention.run(self._stop), name="retention")
            stack.push_async_callback(self._stop_task, purger)
        except BaseException:
            await stack.aclose()
            raise

    def attach(self, sources: Mapping[str, Source]) -> None:
        """Give each source whose verifier reaches the network (``AsyncVerifier``: SNS) its
        client and its job API's rate budget; at start, and after a reload built new verifiers.

        A source keeps one client for the service's life (the egress settings, plus the CA
        bundle its ``aws`` table adds, which only a restart changes), closed at stop."""
        for name, source in sources.items():
            verifier = source.verifier
            cfg = self.settings.sources.get(name)
            if not isinstance(verifier, AsyncVerifier) or cfg is None:
                continue
            client = self._verifier_clients.get(name)
            if client is None:
                outbound = self.egress
                # A provider's table may name a CA bundle its verifier's requests trust too.
                extra_ca = getattr(cfg.table, "extra_ca_bundle", None)
                if extra_ca is not None:
                    outbound = outbound.adding_ca(extra_ca)
                client = httpx.AsyncClient(
                    timeout=httpx.Timeout(10.0, connect=self.settings.results.connect_timeout),
                    headers={"User-Agent": "jobhook"},
                    follow_redirects=False,
                    **outbound.client_options(),
                )
                self._stack.push_async_callback(client.aclose)
                self._verifier_clients[name] = client
            api = self.apis.get(name)
            verifier.attach(
                client, functools.partial(api.limiter.acquire, urgent=True) if api else None
            )

    def counts(self) -> RuntimeCounts:
        """What the job APIs, rate limiters, fetcher and ingestor counted (for ``/metrics``)."""
        fetcher = getattr(self, "fetcher", None)
        ingestor = getattr(self, "ingestor", None)
        drains = self.drain.status if hasattr(self, "drain") else {}
        return RuntimeCounts(
            api_calls={name: dict(api.calls) for name, api in self.apis.items()},
            rate_waits={name: api.limiter.waits for name, api in self.apis.items()},
            rate_waited={name: api.limiter.waited for name, api in self.apis.items()},
            budgets={name: api.limiter.requests_per_minute for name, api in self.apis.items()},
            confirmations={name: d.confirmations for name, d in drains.items()},
            drain_seconds={name: d.eta_seconds for name, d in drains.items()},
            bytes_fetched=fetcher.bytes_fetched if fetcher is not None else 0,
            fetch_failures=dict(fetcher.failures) if fetcher is not None else {},
            events=dict(ingestor.counts) if ingestor is not None else {},
        )

    def _delivered(self, handler: str, outcome: str, seconds: float) -> None:
        if self.metrics is not None:
            self.metrics.delivered(handler, outcome, seconds)
        if outcome == "succeeded":
            self.retention.wake()

    def _finished(self, event: Event, result: IngestResult) -> None:
        """An ingested event made a job's outcome final (it needs no resolution): counted at
        once from what the store answered, with no read on the webhook's path."""
        if self.outcomes is not None:
            self.outcomes.counted(event.source, event.state.value, event.error_code, result.took)

    def _resolved(self, row: CompletionRow, resolution: Resolution) -> None:
        """This replica stored a completion's resolution: the job's outcome is final."""
        if self.outcomes is not None:
            state = resolution.state.value if resolution.state else row.state
            if state in USABLE and resolution.result_path is None and resolution.error_code:
                state = "unresolved"  # finished at the provider, but its result is not to be had
            self.outcomes.finished(row.source, row.job_id, state, resolution.error_code)
        if self.metrics is not None and resolution.error is None:
            self.metrics.confidence.observe(row.source, resolution.fields)

    async def _stop_task(self, task: asyncio.Task[None]) -> None:
        self._stop.set()
        await task

    async def stop(self) -> None:
        """Stop background work (finishing or releasing it) and close everything in reverse."""
        self._stop.set()
        await self._stack.aclose()
