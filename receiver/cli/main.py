"""The ``jobhook`` command line."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import click

from receiver.cli.lazy import LazyGroup
from receiver.errors import ConfigError

CONFIG_OPTION = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar="JOBHOOK_CONFIG",
    show_envvar=True,
    help="TOML configuration file (default: ./jobhook.toml).",
)


# Imported on use, so `jobhook serve` loads neither rich nor the admin client (receiver.cli.lazy).
LAZY_COMMANDS = {
    **{name: f"receiver.cli.jobs:{name}" for name in ("jobs", "track", "wait")},
    "audit": "receiver.cli.audit:audit",
    "replay": "receiver.cli.replay:replay",
    "simulate": "receiver.sim.command:simulate",
    "status": "receiver.cli.status:status",
}


@click.group(cls=LazyGroup, lazy=LAZY_COMMANDS)
@click.version_option(package_name="jobhook")
def main() -> None:
    """jobhook: verified, durable webhooks for document-processing APIs."""


def _fail(exc: ConfigError) -> None:
    click.echo(f"jobhook: {exc}", err=True)
    sys.exit(2)


def _check_installation() -> None:
    """Exit 2 when ``receiver`` or ``handlers`` is not jobhook's own (another package's);
    before anything that imports ``handlers``."""
    from receiver.service.distribution import import_name_problems

    if problems := import_name_problems():
        _fail(ConfigError("\n  ".join(["invalid installation:", *problems])))


@main.command()
@CONFIG_OPTION
@click.option("--host", help="Override server.host (also set by JOBHOOK_SERVER__HOST).")
@click.option("--port", type=int, help="Override server.port (also set by JOBHOOK_SERVER__PORT).")
def serve(config_path: Path | None, host: str | None, port: int | None) -> None:
    """Run the webhook receiver, dispatcher and poller."""
    _check_installation()
    from receiver.service.serve import run

    try:
        run(config_path, host=host, port=port)
    except ConfigError as exc:
        _fail(exc)


DEMO_MIN_SECONDS = 15.0
"""Below this the poller cannot finish a job whose webhook was lost (grace 2 s, delays 0.5-2 s,
simulated jobs that take up to 4 s)."""


@main.command(short_help="Watch jobhook deliver jobs despite lost webhooks.")
@click.option(
    "--jobs",
    type=click.IntRange(1, 1000),
    default=12,
    show_default=True,
    help="How many jobs to submit (1-1000).",
)
@click.option(
    "--drop",
    type=click.FloatRange(0.0, 1.0),
    default=0.3,
    show_default=True,
    help="Fraction of webhooks lost, 0 to 1.",
)
@click.option(
    "--seconds", type=click.FloatRange(DEMO_MIN_SECONDS), default=90.0, show_default=True,
    help=f"Give up after this long (at least {DEMO_MIN_SECONDS:g}).",
)  # fmt: skip
@click.option(
    "--console", "ui", is_flag=True,
    help="Serve the operator console (/ui/) with a one-off admin token, add a DocExtract source "
         "and a downstream HTTP service that is down for its first 20 s, fail jobs with several "
         "error codes, print what to try, and keep serving until Ctrl-C.",
)  # fmt: skip
def demo(jobs: int, drop: float, seconds: float, ui: bool) -> None:
    """Run jobhook against a simulated provider that loses webhooks, and show what happens.

    SIGINT (Ctrl-C) or SIGTERM stops it: --console exits 0 (that is how it ends), the plain
    demo 128 + the signal's number (130 for Ctrl-C) when stopped before it finished.
    """
    import asyncio

    from rich.console import Console

    from receiver.cli.demo import run_demo
    from receiver.cli.demo_setup import until_stopped
    from receiver.ops.log import configure_logging

    # The console demo's dead deliveries are on purpose: its table and the console show them.
    configure_logging("critical" if ui else "error", "console")
    # Not on a terminal, nothing is wrapped: a command or a token stays whole on its line.
    console = Console(soft_wrap=not sys.stdout.isatty())
    try:
        summary, stopped_by = asyncio.run(
            until_stopped(run_demo(jobs, drop, seconds, console, ui=ui))
        )
    except KeyboardInterrupt:  # before the signal handlers were installed
        stopped_by = signal.SIGINT
    if stopped_by is not None:
        console.print(f"jobhook demo: stopped ({signal.Signals(stopped_by).name})")
        sys.exit(0 if ui else 128 + stopped_by)
    assert summary is not None
    if summary["results_written"] != jobs:
        click.echo(
            f"jobhook: {jobs - summary['results_written']} job(s) not delivered within "
            f"{seconds:g} s; run again with a larger --seconds (e.g. --seconds {seconds * 2:g})",
            err=True,
        )
        sys.exit(1)


@main.command("check-config", short_help="Check the configuration as serve would, and exit.")
@CONFIG_OPTION
@click.option(
    "--handler-schema", is_flag=True, help="Print each built-in handler's options (JSON schema)."
)
def check_config(config_path: Path | None, handler_schema: bool) -> None:
    """Check the configuration as serve does before it starts, and exit.

    Settings, secrets and keys, handlers, the result URL policy, the store, the directories and
    the port: exit 0 when serve would start, else 2 with every problem, one line each.
    """
    _check_installation()
    if handler_schema:
        from handlers.options import option_schemas

        click.echo(json.dumps(option_schemas(), indent=2))
        return
    from receiver.service.preflight import preflight

    try:
        settings = preflight(config_path).settings
    except ConfigError as exc:
        _fail(exc)
    click.echo(
        f"configuration OK: {len(settings.sources)} source(s), "
        f"{len(settings.handlers)} handler(s), store {settings.store.url.split('://')[0]}"
    )
