"""Run the service under uvicorn, with settings read once and logging configured first."""

from __future__ import annotations

import gc
import importlib.util
import os
import signal
from typing import TYPE_CHECKING

import uvicorn

from receiver.ops.log import configure_logging
from receiver.ops.tracing import requested as tracing_requested
from receiver.providers import PROVIDERS
from receiver.service.app import App, create_app
from receiver.service.preflight import preflight
from receiver.service.reload import Reloader
from receiver.service.serving import http_protocol

if TYPE_CHECKING:
    from pathlib import Path
    from types import FrameType

    from receiver.store import Store


def run(
    config_path: Path | None,
    *,
    host: str | None = None,
    port: int | None = None,
    store: Store | None = None,
) -> None:
    """Check everything (``preflight``, as ``check-config`` does), build the app and serve it
    until SIGINT/SIGTERM; ConfigError, before anything is opened, lists every problem.

    ``store`` replaces the configured one (``bench.nullstore`` measures the intake without it).
    """
    checked = preflight(config_path, host=host, port=port)
    settings = checked.settings
    trace_ids = tracing_requested(settings.tracing, os.environ)
    # Every provider's SDK loggers, built in or configured: a reload may add a source.
    providers = [*PROVIDERS.values(), *(type(s.provider) for s in checked.sources.values())]
    quiet = sorted({name for cls in providers for name in cls.sdk_loggers})
    configure_logging(
        settings.log.level, settings.log.format, batch=True, trace_ids=trace_ids, quiet=quiet
    )
    app = create_app(settings, store=store, sources=checked.sources, handlers=checked.handlers)
    app.reloader = Reloader(app, config_path, host=host)
    # Everything imported and built so far lives as long as the process: move it out of the
    # collector's sight, so a full collection under load walks only what requests created
    # (its pauses were the tail of the webhook latency: docs/performance.md).
    gc.collect()
    gc.freeze()
    config = uvicorn.Config(
        app,
        host=host or settings.server.host,
        port=settings.server.port if port is None else port,
        loop="uvloop" if importlib.util.find_spec("uvloop") else "asyncio",
        http=http_protocol(),
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=int(settings.server.shutdown_grace_seconds) or None,
        server_header=False,
    )
    Server(config, app).run()


class Server(uvicorn.Server):
    """uvicorn's server, which tells the app at the first stop signal (open event streams end
    at once instead of holding the graceful stop), and exits 0 after a clean SIGTERM stop."""

    def __init__(self, config: uvicorn.Config, app: App) -> None:
        super().__init__(config)
        self.app = app

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        self.app.stopping()
        # uvicorn raises the captured signal again once stopped, which ends a clean stop with
        # status -15; a service manager reads a clean stop as 0. SIGINT keeps its convention.
        if sig == signal.SIGTERM:
            self._captured_signals = [s for s in self._captured_signals if s != sig]
