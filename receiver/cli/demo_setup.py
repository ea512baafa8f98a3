"""The demos' shared setup: jobhook's configuration on loopback, tracking the jobs that a
simulated provider was given, how to write the commands a user pastes into another terminal,
stopping on SIGINT or SIGTERM, and a table that is redrawn only on a terminal (``jobhook demo``
and ``jobhook demo --console``)."""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self, TypeVar

from rich.live import Live

from receiver.config.settings import Settings
from receiver.models import Event, State

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping
    from types import TracebackType

    from rich.console import Console
    from rich.table import Table
    from starlette.applications import Starlette

DEFAULT_INVOCATION = "uv run jobhook"
"""How the README starts jobhook; what a command is printed with when nothing says better."""


def invocation(argv0: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """How this process was started, as a user would type it again in another terminal:
    ``uv run jobhook`` under ``uv run`` (it sets ``UV_RUN_RECURSION_DEPTH``), ``jobhook`` when
    that is the one on PATH, ``python -m receiver``, the script's path as given, or
    ``DEFAULT_INVOCATION``."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    env = os.environ if environ is None else environ
    if env.get("UV_RUN_RECURSION_DEPTH"):
        return DEFAULT_INVOCATION
    script = Path(argv0)
    if script.name == "__main__.py" and script.parent.name == "receiver":
        return "python -m receiver"
    if script.name != "jobhook":
        return DEFAULT_INVOCATION  # e.g. a test runner
    on_path = shutil.which("jobhook", path=env.get("PATH"))
    if on_path is not None and Path(on_path).resolve() == script.resolve():
        return "jobhook"
    return shlex.quote(argv0)


def demo_config(
    data_dir: Path, sim_url: str, secret: str, api_key: str, admin_token: str | None = None
) -> dict[str, Any]:
    """The demo's configuration as data (the console demo adds a source and a handler)."""
    return {
            "data_dir": str(data_dir),
            "server": {"admin_token": admin_token} if admin_token else {},
            "results": {"allowed_hosts": ["127.0.0.1"], "allow_http": True,
                        "allow_private_networks": True},
            "sources": {"reducto": {
                "provider": "reducto", "secrets": [secret], "api_base_url": sim_url,
                "api_key": api_key,
                "poll": {"grace_seconds": 2.0, "initial_delay": 0.5, "max_delay": 2.0,
                         "requests_per_minute": 600},
            }},
            "handlers": [{"name": "files", "type": "file", "dir": str(data_dir / "out")}],
            "log": {"level": "warning"},
        }  # fmt: skip


def demo_settings(
    data_dir: Path, sim_url: str, secret: str, api_key: str, admin_token: str | None = None
) -> Settings:
    config = demo_config(data_dir, sim_url, secret, api_key, admin_token)
    return Settings.model_validate(config, context={"env": {}})


async def track(app: Starlette, source: str, job_ids: list[str]) -> None:
    """Tell jobhook about jobs submitted elsewhere, as ``POST /jobs`` would."""
    for job_id in job_ids:
        await app.state.ingestor.ingest(
            Event(source=source, job_id=job_id, state=State.QUEUED,
                  provider_status="tracked", via="track")
        )  # fmt: skip


T = TypeVar("T")
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


async def until_stopped(work: Awaitable[T]) -> tuple[T | None, int | None]:
    """Run ``work`` until it ends or SIGINT or SIGTERM arrives, on a terminal or not: its
    result and None, or None and the signal's number (``work`` is cancelled and cleans up)."""
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(work)
    received: list[int] = []

    def stop(signum: int) -> None:
        if not received:
            received.append(signum)
            task.cancel()

    for signum in STOP_SIGNALS:
        loop.add_signal_handler(signum, stop, signum)
    try:
        return await task, None
    except asyncio.CancelledError:
        if not received:
            raise
        return None, received[0]
    finally:
        for signum in STOP_SIGNALS:
            loop.remove_signal_handler(signum)


class LiveTable:
    """A table redrawn in place on a terminal (rich's Live); elsewhere (a pipe, a file) only
    its last state, printed once when the block ends, on lines of its own."""

    def __init__(self, console: Console, render: Callable[[], Table]) -> None:
        self._console = console
        self._render = render
        self._live: Live | None = None

    def __enter__(self) -> Self:
        if self._console.is_terminal:
            self._live = Live(self._render(), console=self._console)
            self._live.start()
        return self

    def update(self) -> None:
        if self._live is not None:
            self._live.update(self._render())

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._live is not None:
            self._live.update(self._render())
            self._live.stop()
        else:
            self._console.print(self._render())
