"""The ``jobhook`` command line."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from receiver.cli_lazy import LazyGroup
from receiver.errors import ConfigError

CONFIG_OPTION = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar="JOBHOOK_CONFIG",
    help="TOML configuration file (default: $JOBHOOK_CONFIG, then ./jobhook.toml).",
)


# Imported on use, so `jobhook serve` loads neither rich nor the admin client (receiver.cli_lazy).
LAZY_COMMANDS = {
    **{name: f"receiver.cli_jobs:{name}" for name in ("jobs", "replay", "track", "wait")},
    "simulate": "receiver.sim.command:simulate",
}


@click.group(cls=LazyGroup, lazy=LAZY_COMMANDS)
@click.version_option(package_name="jobhook")
def main() -> None:
    """jobhook: verified, durable webhooks for document-processing APIs."""


def _fail(exc: ConfigError) -> None:
    click.echo(f"jobhook: {exc}", err=True)
    sys.exit(2)


@main.command()
@CONFIG_OPTION
@click.option("--host", help="Override server.host.")
@click.option("--port", type=int, help="Override server.port.")
def serve(config_path: Path | None, host: str | None, port: int | None) -> None:
    """Run the webhook receiver, dispatcher and poller."""
    from receiver.serve import run

    try:
        run(config_path, host=host, port=port)
    except ConfigError as exc:
        _fail(exc)


@main.command()
@click.option("--jobs", default=12, show_default=True, help="How many jobs to submit.")
@click.option("--drop", default=0.3, show_default=True, help="Fraction of webhooks lost.")
@click.option("--seconds", default=90.0, show_default=True, help="Give up after this long.")
def demo(jobs: int, drop: float, seconds: float) -> None:
    """Run jobhook against a simulated provider that loses webhooks, and show what happens."""
    import asyncio

    from rich.console import Console

    from receiver.demo import run_demo
    from receiver.log import configure_logging

    configure_logging("error", "console")
    summary = asyncio.run(run_demo(jobs, drop, seconds, Console()))
    sys.exit(0 if summary["results_written"] == jobs else 1)


@main.command("check-config")
@CONFIG_OPTION
def check_config(config_path: Path | None) -> None:
    """Validate the configuration (secrets resolved, handlers loaded) and exit."""
    from receiver.app import build_sources
    from receiver.config import load_settings
    from receiver.runtime import load_handlers

    try:
        settings = load_settings(config_path)
        build_sources(settings)
        load_handlers(settings)
    except ConfigError as exc:
        _fail(exc)
    click.echo(
        f"configuration OK: {len(settings.sources)} source(s), "
        f"{len(settings.handlers)} handler(s), store {settings.store.url.split('://')[0]}"
    )
