"""``jobhook jobs ls|show|stats|export``, ``wait`` and ``track`` (``replay`` is in replay.py).

They talk to a running service (``--url``/``JOBHOOK_URL``, ``--token``/``JOBHOOK_ADMIN_TOKEN``);
the read-only ``jobs`` commands can instead read the store directly: with ``--config`` (or
``JOBHOOK_CONFIG``) and no URL they open the store the configuration names. Tables by default,
``--json`` for scripts. Exit codes: 0 done, 2 bad input, 4 service or store trouble; ``wait``
also 1 (the job ended other than succeeded) and 3 (timed out).
"""

from __future__ import annotations

import functools
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from receiver.admin.query import DEFAULT_LIMIT, MAX_LIMIT, PERIODS
from receiver.cli import render as cli_render
from receiver.cli.client import ClientError, ServiceClient, StoreReader
from receiver.cli.lazy import LazyGroup

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

DEFAULT_URL = "http://127.0.0.1:8000"
WAIT_STEP_SECONDS = 2.0
EXIT_FAILED, EXIT_TIMEOUT = 1, 3


def _service(url: str | None, token: str | None, *, store_fallback: bool = False) -> ServiceClient:
    return ServiceClient(url or DEFAULT_URL, token, store_fallback=store_fallback)


def _reader(url: str | None, token: str | None, config: Path | None) -> ServiceClient | StoreReader:
    """The service when a URL is given or no configuration is; else the store itself."""
    if url is None and config is not None:
        from receiver.ops.log import configure_logging

        configure_logging("warning", "console")  # on stderr: stdout is for the answer
        return StoreReader(config)
    return _service(url, token, store_fallback=True)


def _options(*, store: bool) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        options = [
            click.option(
                "--url",
                envvar="JOBHOOK_URL",
                show_envvar=True,
                help=f"jobhook's URL [{DEFAULT_URL}].",
            ),
            click.option(
                "--token",
                envvar="JOBHOOK_ADMIN_TOKEN",
                show_envvar=True,
                help="A token: server.admin_token or one of [[server.tokens]], whose role allows "
                "the command (read to look, track to track, operate to replay, admin for "
                "reprocess and the audit trail).",
            ),
        ]
        if store:
            options.append(click.option(
                "--config", "config_path", envvar="JOBHOOK_CONFIG", show_envvar=True,
                type=click.Path(dir_okay=False, path_type=Path),
                help="Read the store this config names, without a service (when no --url).",
            ))  # fmt: skip
        for option in reversed(options):
            command = option(command)
        return command

    return decorate


def _json_option(command: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")(command)


def _filter_options(command: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed([
        click.option("--source", help="Only this source."),
        click.option("--state", help="Only this state (queued, running, succeeded, ...)."),
        click.option("--created-after", help="ISO 8601 (UTC) or Unix seconds."),
        click.option("--created-before", help="ISO 8601 (UTC) or Unix seconds."),
        click.option("--metadata", multiple=True, metavar="KEY=VALUE",
                     help="Metadata the job must hold (repeatable)."),
        click.option("--min-confidence", help="Least confident field at least this."),
        click.option("--error-code", help="Failed with this code (http_5xx, DOCUMENT_CORRUPT...)."),
        click.option("--field", help="Only jobs whose result has this extracted field."),
        click.option("--max-confidence", help="With --field: that field at most this confident."),
    ]):  # fmt: skip
        command = option(command)
    return command


def metadata_pairs(given: Sequence[str]) -> list[tuple[str, str]]:
    """``--metadata KEY=VALUE`` options as (key, value) pairs; exit 2 for one without a key."""
    pairs = []
    for pair in given:
        key, found, value = pair.partition("=")
        if not found or not key:
            raise ClientError(f"--metadata {pair!r} is not KEY=VALUE", exit_code=2)
        pairs.append((key, value))
    return pairs


def _filters(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The filter options as the admin API spells them (metadata as key:value)."""
    pairs = [f"{key}:{value}" for key, value in metadata_pairs(kwargs.pop("metadata"))]
    names = ("source", "state", "created_after", "created_before", "min_confidence", "error_code",
             "field", "max_confidence")  # fmt: skip
    return {"metadata": pairs, **{name: kwargs.pop(name) for name in names}}


def _errors(command: Callable[..., Any]) -> Callable[..., Any]:
    """Turn ClientError into its message on stderr and its exit code."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except ClientError as exc:
            click.echo(f"jobhook: {exc}", err=True)
            sys.exit(exc.exit_code)

    return run


def _emit(doc: Any, as_json: bool, render: Callable[[Any], None]) -> None:
    if as_json:
        click.echo(json.dumps(doc, indent=2))
    else:
        render(doc)


@click.group(cls=LazyGroup, lazy={"reprocess": "receiver.cli.reprocess:reprocess"})
def jobs() -> None:
    """Look at jobs: list, show, stats, export."""


@jobs.command("ls")
@_options(store=True)
@_filter_options
@click.option(
    "--limit",
    type=click.IntRange(1, MAX_LIMIT),
    default=DEFAULT_LIMIT,
    show_default=True,
    help="Jobs per page.",
)
@click.option("--cursor", help="next_cursor of the previous page.")
@click.option("--all", "every", is_flag=True, help="Follow the cursor to the last page.")
@_json_option
@_errors
def ls(url: str | None, token: str | None, config_path: Path | None, limit: int,
       cursor: str | None, every: bool, as_json: bool, **kwargs: Any) -> None:  # fmt: skip
    """List jobs, newest first."""
    filters = _filters(kwargs)
    client = _reader(url, token, config_path)
    try:
        page = client.list_jobs(filters, limit, cursor)
        found = list(page["jobs"])
        while every and page["next_cursor"]:
            page = client.list_jobs(filters, limit, page["next_cursor"])
            found += page["jobs"]
    finally:
        client.close()
    _emit({"jobs": found, "next_cursor": page["next_cursor"]}, as_json, cli_render.job_table)


@jobs.command("show", short_help="A job with its deliveries and handler dispatches.")
@_options(store=True)
@click.argument("source")
@click.argument("job_id")
@_json_option
@_errors
def show(url: str | None, token: str | None, config_path: Path | None, source: str,
         job_id: str, as_json: bool) -> None:  # fmt: skip
    """A job with its webhook deliveries, completion and handler dispatches."""
    client = _reader(url, token, config_path)
    try:
        detail = client.show(source, job_id)
    finally:
        client.close()
    _emit(detail, as_json, cli_render.job_detail)


@jobs.command("stats", short_help="Totals, success rate, times and failures.")
@_options(store=True)
@click.option(
    "--period",
    type=click.Choice(list(PERIODS)),
    default="24h",
    show_default=True,
    help="Jobs created within this period.",
)
@_json_option
@_errors
def stats(url: str | None, token: str | None, config_path: Path | None, period: str,
          as_json: bool) -> None:  # fmt: skip
    """Totals, states, sources, success rate, processing times, handler failures."""
    client = _reader(url, token, config_path)
    try:
        figures = client.stats(period)
    finally:
        client.close()
    _emit(figures, as_json, cli_render.stats)


@jobs.command("export")
@_options(store=True)
@_filter_options
@click.option("--format", "fmt", type=click.Choice(["csv", "jsonl"]), default="csv",
              show_default=True, help="CSV, or JSON Lines (one job a line).")  # fmt: skip
@click.option("--include-result", is_flag=True, help="jsonl: add each stored JSON result.")
@click.option(
    "--fields",
    "columns",
    metavar="A,B",
    help="csv: these extracted fields as columns [every field seen, at most 100].",
)
@click.option("--output", "-o", type=click.Path(dir_okay=False, allow_dash=True), default="-",
              help="File to write (default: standard output).")  # fmt: skip
@_errors
def export(url: str | None, token: str | None, config_path: Path | None, fmt: str,
           include_result: bool, columns: str | None, output: str,
           **kwargs: Any) -> None:  # fmt: skip
    """Every matching job as CSV or JSON Lines, streamed."""
    filters = _filters(kwargs)
    client = _reader(url, token, config_path)
    try:
        with click.open_file(output, "w", encoding="utf-8", atomic=output != "-") as out:
            for chunk in client.export(filters, fmt, include_result, columns):
                out.write(chunk)
    finally:
        client.close()


@click.command(short_help="Register a job just submitted, so it is watched.")
@_options(store=False)
@click.argument("source")
@click.argument("job_id")
@click.option("--metadata", multiple=True, metavar="KEY=VALUE", help="Metadata (repeatable).")
@click.option("--pages", type=click.IntRange(1, 1_000_000), help="The document's page count.")
@_json_option
@_errors
def track(url: str | None, token: str | None, source: str, job_id: str,
          metadata: Sequence[str], pages: int | None, as_json: bool) -> None:  # fmt: skip
    """Register a job just submitted to a provider, so it is watched (and polled)."""
    values = dict(metadata_pairs(metadata))
    client = _service(url, token)
    try:
        answer = client.track(source, job_id, values, pages)
    finally:
        client.close()
    _emit(answer, as_json, lambda a: click.echo(
        f"tracking {source}/{job_id}: {a['job']['state']}"))  # fmt: skip


@click.command(short_help="Wait until a job ends (exit 0 if it succeeded).")
@_options(store=False)
@click.argument("source")
@click.argument("job_id")
@click.option("--timeout", type=click.FloatRange(0), default=3600.0, show_default=True,
              help="Give up after this many seconds (exit code 3).")  # fmt: skip
@_json_option
@_errors
def wait(url: str | None, token: str | None, source: str, job_id: str, timeout: float,
         as_json: bool) -> None:  # fmt: skip
    """Wait until a job is terminal: exit 0 if it succeeded, 1 if not, 3 on timeout."""
    client = _service(url, token)
    deadline = time.monotonic() + timeout
    try:
        with cli_render.JobProgress(f"{source}/{job_id}") as progress:
            while True:
                left = max(deadline - time.monotonic(), 0.0)
                detail = client.wait(source, job_id, min(left, WAIT_STEP_SECONDS))
                progress.update(detail["job"])
                if detail["job"]["terminal"] or time.monotonic() >= deadline:
                    break
    finally:
        client.close()
    _emit(detail, as_json, cli_render.wait_summary)
    job = detail["job"]
    if not job["terminal"]:
        sys.exit(EXIT_TIMEOUT)
    sys.exit(0 if job["state"] == "succeeded" else EXIT_FAILED)


COMMANDS = (jobs, track, wait)
