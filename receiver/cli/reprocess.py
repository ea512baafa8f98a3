"""``jobhook jobs reprocess``: submit finished jobs again at their provider, one job
(``reprocess SOURCE JOB_ID``) or every job a filter selects (``reprocess --source docextract
--state failed [--error-code X] [--since 24h] [--dry-run]``), in calls of ``PER_CALL`` jobs with
a progress bar, through ``POST /jobs/reprocess``."""

from __future__ import annotations

import time
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from receiver.cli.client import ClientError, ServiceClient
from receiver.cli.jobs import _emit, _errors, _json_option, _options, _service, metadata_pairs
from receiver.cli.replay import since_value

PER_CALL = 10
"""Jobs per call: each goes at the provider's rate budget, so calls stay short."""
COUNTS = ("submitted", "already_reprocessed", "not_reprocessable", "failed")


@click.command(short_help="Submit finished jobs again at their provider.")
@_options(store=False)
@click.argument("source", required=False)
@click.argument("job_id", required=False)
@click.option("--source", "source_filter", help="Filter: jobs of this source.")
@click.option("--state", default="failed", show_default=True, help="Filter: jobs in this state.")
@click.option("--error-code", help="Filter: jobs that failed with this code.")
@click.option("--since", help="Filter: jobs created within 24h, 30m, 7d (or since a time).")
@click.option("--metadata", multiple=True, metavar="KEY=VALUE", help="Filter: job metadata.")
@click.option("--force", is_flag=True, help="Submit again even jobs already reprocessed.")
@click.option("--dry-run", is_flag=True, help="Only count what would be submitted, and why not.")
@_json_option
@_errors
def reprocess(url: str | None, token: str | None, source: str | None, job_id: str | None,
              source_filter: str | None, state: str, error_code: str | None,
              since: str | None, metadata: tuple[str, ...], force: bool, dry_run: bool,
              as_json: bool) -> None:  # fmt: skip
    """Submit finished jobs again at their provider: one job (SOURCE JOB_ID), or a filter's."""
    if (source is None) != (job_id is None):
        raise ClientError("give SOURCE and JOB_ID for one job, or neither and filters", 2)
    client = _service(url, token)
    try:
        if source is not None and job_id is not None:
            answer = client.reprocess(source, job_id, force)
            _emit(answer, as_json, _one)
            return
        pairs = [f"{key}:{value}" for key, value in metadata_pairs(metadata)]
        body = {"source": source_filter, "state": state, "error_code": error_code,
                "metadata": pairs, "created_after": since_value(since, time.time()),
                "force": force}  # fmt: skip
        body = {key: value for key, value in body.items() if value not in (None, [])}
        counted = client.reprocess_matching({**body, "dry_run": True})
        if dry_run:
            _emit(counted, as_json, _counted)
            return
        answer = _run(client, body, counted["count"], quiet=as_json)
    finally:
        client.close()
    _emit(answer, as_json, _summary)


def _one(answer: dict[str, Any]) -> None:
    job = f"{answer['source']}/{answer['job_id']}"
    if answer["status"] == "submitted":
        click.echo(f"{job} submitted again as {answer['source']}/{answer['new_job_id']}")
    else:
        new = answer.get("new_job_id")
        click.echo(f"{job} was already reprocessed" + (f" as {new}" if new else "")
                   + f" ({answer.get('detail')}); --force submits it again")  # fmt: skip


def _counted(answer: dict[str, Any]) -> None:
    click.echo(f"would submit {answer['count']}; already reprocessed "
               f"{answer['already_reprocessed']}; not reprocessable "
               f"{answer['not_reprocessable']}")  # fmt: skip
    for reason, count in answer["reasons"].items():
        click.echo(f"  {count}: {reason}")


def _summary(answer: dict[str, Any]) -> None:
    click.echo(", ".join(f"{name.replace('_', ' ')} {answer[name]}" for name in COUNTS)
               + f" (reprocess {answer['reprocess_id']})")  # fmt: skip
    for reason, count in answer["reasons"].items():
        click.echo(f"  {count}: {reason}")
    for job in answer["jobs"]:
        if job["status"] == "failed":
            click.echo(f"  failed {job['source']}/{job['job_id']}: {job['detail']}", err=True)


def _run(client: ServiceClient, body: dict[str, Any], total: int, *, quiet: bool) -> dict[str, Any]:
    """Call until the service says nothing is left; the bar advances by the jobs looked at."""
    progress = Progress(
        TextColumn("reprocess"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=Console(stderr=True), disable=quiet,
    )  # fmt: skip
    totals: dict[str, Any] = {name: 0 for name in COUNTS}
    totals.update(reasons={}, jobs=[])
    cursor, reprocess_id = None, None
    with progress:
        task = progress.add_task("reprocess", total=total)
        while True:
            call = {**body, "limit": PER_CALL, "cursor": cursor, "reprocess_id": reprocess_id}
            answer = client.reprocess_matching({k: v for k, v in call.items() if v is not None})
            for name in COUNTS:
                totals[name] += answer[name]
            for reason, count in answer["reasons"].items():
                totals["reasons"][reason] = totals["reasons"].get(reason, 0) + count
            totals["jobs"].extend(answer["jobs"])
            reprocess_id, cursor = answer["reprocess_id"], answer["next_cursor"]
            progress.update(task, completed=min(totals["submitted"], total))
            if cursor is None:
                break
    return {"reprocess_id": reprocess_id, **totals}
