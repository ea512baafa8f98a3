"""``create_app``: the Starlette application, its routes and the lifespan that owns resources."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from typing import TYPE_CHECKING, Protocol, TypeAlias

import structlog
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from receiver import tracing
from receiver.admin.routes import admin_routes
from receiver.admin.tokens import Keyring, Proxies
from receiver.console.routes import console_routes
from receiver.console.session import Sessions
from receiver.console.throttle import Throttle
from receiver.errors import JobhookError, RejectedError, RetryableError
from receiver.intake import direct, webhooks
from receiver.ops import health
from receiver.ops import tracing as ops_tracing
from receiver.ops.log import SINK
from receiver.ops.metrics import Metrics, metrics_endpoint
from receiver.providers import get_provider
from receiver.service.runtime import Runtime, load_handlers
from receiver.signatures import build_verifier
from receiver.signatures.sns import SnsTopics, SnsVerifier

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Mapping
    from contextlib import AbstractAsyncContextManager

    from starlette.responses import Response
    from starlette.types import Message, Receive, Scope, Send

    from receiver.completion import Handler
    from receiver.config.settings import Settings, SourceSettings
    from receiver.store import Store

    Lifespan: TypeAlias = Callable[[Starlette], AbstractAsyncContextManager[None]]

log = structlog.get_logger("receiver.app")


def build_source(name: str, cfg: SourceSettings) -> webhooks.Source:
    """A source's verifier (of its signature scheme; none for a direct-only source) and
    provider adapter."""
    provider = get_provider(cfg.provider, cfg.table, api_version=cfg.api_version)
    if cfg.signature == SnsVerifier.scheme and isinstance(cfg.table, SnsTopics):
        return webhooks.Source(name, provider, SnsVerifier.for_table(cfg.table, source=name))
    return webhooks.Source(
        name,
        provider,
        build_verifier(
            cfg.signature, cfg.secrets, public_keys=cfg.public_keys, own=provider.verifiers
        )
        if cfg.secrets or cfg.public_keys
        else direct.SignedWebhooksOff(),
    )


def build_sources(settings: Settings) -> dict[str, webhooks.Source]:
    """One verifier and adapter per configured source."""
    return {name: build_source(name, cfg) for name, cfg in settings.sources.items()}


async def _rejected(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RejectedError)
    # A body that never came: close the connection now, not after uvicorn's keep-alive
    # timeout, which a client that sends headers and nothing more would hold it for too.
    headers = {"Connection": "close"} if exc.status_code == 408 else None
    return JSONResponse(
        {"error": exc.reason, "detail": exc.detail}, status_code=exc.status_code, headers=headers
    )


async def _retryable(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RetryableError)
    retry_after = str(round(exc.retry_after)) if exc.retry_after else "5"
    return JSONResponse(
        {"error": "unavailable", "detail": str(exc)},
        status_code=503,
        headers={"Retry-After": retry_after},
    )


WEBHOOKS = "/webhooks/"


class Reloading(Protocol):
    """What the lifespan needs of ``receiver.service.reload.Reloader`` (which imports this)."""

    @property
    def settings(self) -> Settings: ...

    async def reload(self, why: str) -> bool: ...

    async def watch(self, stop: asyncio.Event, every: float) -> None: ...


class App(Starlette):
    """Starlette, but ``POST /webhooks/{source}`` goes straight to the webhook endpoint.

    That route is nearly all of the traffic, and Starlette's error middleware, exception
    middleware and router are a measurable share of its cost (docs/performance.md). It
    is answered here exactly as the routed path answers it:
    rejections through the same handlers, any other exception left to uvicorn's 500. Every
    other request, and a webhook path the route would not match, goes through Starlette.
    """

    webhook: webhooks.WebhookEndpoint | direct.HeaderHints | None = None
    reloader: Reloading | None = None
    """Set by ``serve``: SIGHUP and changed files reload secrets (receiver.service.reload)."""
    loop: asyncio.AbstractEventLoop | None = None
    """The loop the lifespan runs on, for ``stopping`` to reach from a signal handler."""

    def stopping(self) -> None:
        """A stop signal arrived (from any thread): end event streams and long-polls now, so
        the server's graceful wait for open responses is not spent on them."""
        runtime = getattr(self.state, "runtime", None)
        if runtime is not None and self.loop is not None and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(runtime.notifier.close)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.webhook is not None and scope["type"] == "http" and scope["method"] == "POST":
            path: str = scope["path"]
            source = path[len(WEBHOOKS) :]
            if path.startswith(WEBHOOKS) and source and "/" not in source:
                scope["app"] = self
                scope["path_params"] = {"source": source}
                try:
                    await self.webhook(scope, receive, send)
                except RejectedError as exc:
                    await (await _rejected(Request(scope), exc))(scope, receive, send)
                except RetryableError as exc:
                    await (await _retryable(Request(scope), exc))(scope, receive, send)
                return
        if scope["type"] == "lifespan":
            send = self._startup_failure_in_one_line(send)
        await super().__call__(scope, receive, send)

    def _startup_failure_in_one_line(self, send: Send) -> Send:
        """Starlette reports a failed startup with the whole traceback, which uvicorn logs as
        one JSON line; a JobhookError (a store that cannot be opened) is reported as its
        message, which names what failed."""

        async def sending(message: Message) -> None:
            error = getattr(self.state, "startup_error", None)
            if message["type"] == "lifespan.startup.failed" and error is not None:
                message = {**message, "message": error}
            await send(message)

        return sending


def _traced(backend: ops_tracing.OtelBackend | None, lifespan: Lifespan) -> Lifespan:
    """``lifespan`` with tracing on for the app's life; then off, and what is pending exported
    (on a thread: the export may go to a collector this event loop serves, as in the tests)."""
    if backend is None:
        return lifespan

    @contextlib.asynccontextmanager
    async def traced(app: Starlette) -> AsyncIterator[None]:
        tracing.install(backend)
        try:
            async with lifespan(app):
                yield
        finally:
            tracing.install(None)
            await asyncio.to_thread(backend.shutdown)

    return traced


def hint_auth(
    settings: Settings, sources: Mapping[str, webhooks.Source]
) -> dict[str, direct.HintAuth]:
    """How each direct-mode source's unsigned callbacks prove themselves (tokens, header)."""
    return {
        name: direct.HintAuth(
            sources[name].provider.hint_job_field or "job_id",
            cfg.direct_tokens,
            cfg.direct_header,
            cfg.direct_header_values,
        )
        for name, cfg in settings.sources.items()
        if cfg.webhook_mode == "direct"
    }


def create_app(
    settings: Settings,
    *,
    store: Store | None = None,
    sources: dict[str, webhooks.Source] | None = None,
    handlers: dict[str, Handler] | None = None,
) -> App:
    """Build the application; resources are opened by the lifespan, not here.

    Sources and handlers are built now (unless ``preflight`` built them), so a bad secret or
    handler stops startup.
    """
    sources = build_sources(settings) if sources is None else sources
    handlers = load_handlers(settings) if handlers is None else handlers
    metrics = Metrics(
        sources, {name: cfg.confidence_fields for name, cfg in settings.sources.items()}
    )
    admin = admin_routes(settings.server.any_token)
    webhook = webhooks.WebhookEndpoint(sources, metrics, settings.server)
    hints = direct.DirectEndpoint(
        hint_auth(settings, sources),
        settings.server.max_body_bytes,
        settings.server.body_timeout_seconds,
    )
    # Sources whose hints come with a header share the signed sources' route.
    entry = direct.HeaderHints(webhook, hints) if hints.by_header else webhook
    tracer = ops_tracing.build(settings.tracing, os.environ)  # None unless tracing is asked for

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        with SINK.batching_in(asyncio.get_running_loop()):
            runtime = Runtime(settings, handlers, store, metrics)
            try:
                await runtime.start()
            except JobhookError as exc:
                app.state.startup_error = f"startup failed: {exc}"
                raise
            try:
                runtime.attach(sources)
            except JobhookError as exc:
                app.state.startup_error = f"startup failed: {exc}"
                await runtime.stop()
                raise
            metrics.bind(runtime.counts)
            app.state.runtime = runtime
            if isinstance(app, App):
                app.loop = asyncio.get_running_loop()
            app.state.store = runtime.store
            app.state.ingestor = webhook.ingestor = runtime.ingestor
            hints.hints = runtime.hints
            log.info(
                "started",
                sources=sorted(sources),
                handlers=sorted(handlers),
                store=repr(runtime.store),
            )
            if not sources:
                hint = "every webhook will answer 404 until one is configured"
                log.warning("no_sources", hint=hint)
            if not admin:
                log.info(
                    "admin_routes_off",
                    hint="set server.admin_token or [[server.tokens]] to serve /jobs and /events",
                )
            else:
                log.info("console_on", url=console_url(settings))
            watching = _start_reloading(app)
            try:
                yield
            finally:
                await _stop_reloading(watching)
                await runtime.stop()
                log.info("stopped")

    app = App(
        routes=[
            Route(WEBHOOKS + "{source}", entry, methods=["POST"]),
            Route(WEBHOOKS + "{source}/{token}", hints.handle, methods=["POST"]),
            Route("/healthz", health.healthz, methods=["GET"]),
            Route("/readyz", health.readyz, methods=["GET"]),
            Route("/metrics", metrics_endpoint, methods=["GET"]),
            Route("/openapi.json", _openapi, methods=["GET"]),
            *admin,
            *console_routes(settings.server.any_token),
        ],
        exception_handlers={RejectedError: _rejected, RetryableError: _retryable},
        lifespan=_traced(tracer, lifespan),
    )
    app.webhook = entry
    app.state.webhook_endpoint = webhook
    app.state.direct_endpoint = hints
    app.state.settings = settings
    app.state.sources = sources
    app.state.metrics = metrics
    if settings.server.any_token:
        install_tokens(app, settings)
    return app


def install_tokens(app: Starlette, settings: Settings) -> None:
    """The tokens, the console's sessions, the trusted proxies and the login throttle as
    ``settings`` has them: each one object, swapped whole (a request reads each once)."""
    keyring = Keyring.from_settings(settings.server)
    app.state.keyring = keyring
    app.state.proxies = Proxies.from_settings(settings.server)
    app.state.console_sessions = Sessions(keyring)
    throttle = getattr(app.state, "login_throttle", None)
    limit = (settings.server.login_attempts, settings.server.login_window_seconds)
    if throttle is None or (throttle.attempts, throttle.window) != limit:
        app.state.login_throttle = Throttle(*limit)


async def _openapi(request: Request) -> Response:
    """``GET /openapi.json``; its module (the admin's request models and their schemas) is
    loaded at the first request, not by every service that never asks."""
    from receiver.service.openapi import openapi_endpoint

    return await openapi_endpoint(request)


def _start_reloading(app: Starlette) -> tuple[asyncio.Event, asyncio.Task[None]] | None:
    """SIGHUP reloads (instead of ending the process), and a task watches the files."""
    reloader = app.reloader if isinstance(app, App) else None
    if reloader is None:
        return None
    loop = asyncio.get_running_loop()
    pending: set[asyncio.Task[bool]] = set()

    def hangup() -> None:
        task = loop.create_task(reloader.reload("SIGHUP"))
        pending.add(task)
        task.add_done_callback(pending.discard)

    with contextlib.suppress(NotImplementedError, RuntimeError):  # no signals off the main thread
        loop.add_signal_handler(signal.SIGHUP, hangup)
    stop = asyncio.Event()
    every = reloader.settings.server.reload_watch_seconds
    return stop, loop.create_task(reloader.watch(stop, every), name="reload-watch")


async def _stop_reloading(watching: tuple[asyncio.Event, asyncio.Task[None]] | None) -> None:
    if watching is None:
        return
    stop, task = watching
    with contextlib.suppress(NotImplementedError, RuntimeError):
        asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)
    stop.set()
    await task


def console_url(settings: Settings) -> str:
    """Where the console is, as logged at startup and printed by ``jobhook demo``."""
    host = settings.server.host
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else f"[{host}]" if ":" in host else host  # noqa: S104
    return f"http://{shown}:{settings.server.port}/ui/"
