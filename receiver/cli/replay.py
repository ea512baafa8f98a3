"""``jobhook replay``: one job's deliveries (``replay SOURCE JOB_ID``), or every delivery a
filter selects (``replay --state dead --handler archive --since 24h [--dry-run]``), in calls of
``PER_CALL`` with a progress bar, through ``POST /jobs/replay``."""

from __future__ import annotations

import re
import time
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from receiver.cli.client import ClientError, ServiceClient
from receiver.cli.jobs import _emit, _errors, _json_option, _options, _service, metadata_pairs

PER_CALL = 1000
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def since_value(text: str | None, now: float) -> str | None:
    """``24h`` / ``30m`` / ``7d`` as Unix seconds that long ago; anything else as given."""
    if text is None:
        return None
    found = _DURATION.match(text)
    if found is None:
        return text
    return f"{now - float(found[1]) * _UNITS[found[2]]:.3f}"


@click.command(short_help="Queue handler deliveries again (dead ones by default).")
@_options(store=False)
@click.argument("source", required=False)
@click.argument("job_id", required=False)
@click.option("--handler", help="Only this handler's deliveries.")
@click.option("--include-succeeded", is_flag=True, help="One job: also replay successful ones.")
@click.option(
    "--state",
    "dispatch_state",
    type=click.Choice(["dead", "succeeded"]),
    default="dead",
    show_default=True,
    help="Filter: deliveries in this state.",
)
@click.option(
    "--since", help="Filter: deliveries last tried within 24h, 30m, 7d (or since a time)."
)
@click.option("--source", "source_filter", help="Filter: jobs of this source.")
@click.option("--job-state", help="Filter: jobs in this state (failed, succeeded, ...).")
@click.option("--error-code", help="Filter: jobs or deliveries that failed with this code.")
@click.option("--metadata", multiple=True, metavar="KEY=VALUE", help="Filter: job metadata.")
@click.option("--dry-run", is_flag=True, help="Filter: only count what would be requeued.")
@_json_option
@_errors
def replay(url: str | None, token: str | None, source: str | None, job_id: str | None,
           handler: str | None, include_succeeded: bool, dispatch_state: str, since: str | None,
           source_filter: str | None, job_state: str | None, error_code: str | None,
           metadata: tuple[str, ...], dry_run: bool, as_json: bool) -> None:  # fmt: skip
    """Queue handler deliveries again: one job's (SOURCE JOB_ID), or all a filter selects."""
    if (source is None) != (job_id is None):
        raise ClientError("give SOURCE and JOB_ID for one job, or neither and filters", 2)
    client = _service(url, token)
    try:
        if source is not None and job_id is not None:
            answer = client.replay(source, job_id, handler, include_succeeded)
            _emit(answer, as_json, lambda a: click.echo(
                f"requeued {a['requeued']} delivery(ies) of {source}/{job_id}"))  # fmt: skip
            return
        pairs = [f"{key}:{value}" for key, value in metadata_pairs(metadata)]
        body = {"dispatch_state": dispatch_state, "handler": handler, "source": source_filter,
                "state": job_state, "error_code": error_code, "metadata": pairs,
                "since": since_value(since, time.time())}  # fmt: skip
        body = {key: value for key, value in body.items() if value not in (None, [])}
        counted = client.replay_matching({**body, "dry_run": True})
        if dry_run:
            _emit(counted, as_json, lambda a: click.echo(f"would requeue {a['count']}"))
            return
        answer = _run(client, body, counted["count"], quiet=as_json)
    finally:
        client.close()
    _emit(answer, as_json, lambda a: click.echo(
        f"requeued {a['requeued']} delivery(ies) (replay {a['replay_id']})"))  # fmt: skip


def _run(client: ServiceClient, body: dict[str, Any], total: int, *, quiet: bool) -> dict[str, Any]:
    """Call until the service says nothing is left, a bar advancing by what each call requeued."""
    progress = Progress(
        TextColumn("replay"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=Console(stderr=True), disable=quiet,
    )  # fmt: skip
    requeued, cursor, replay_id = 0, None, None
    with progress:
        task = progress.add_task("replay", total=total)
        while True:
            call = {**body, "limit": PER_CALL, "cursor": cursor, "replay_id": replay_id}
            answer = client.replay_matching({k: v for k, v in call.items() if v is not None})
            requeued += answer["requeued"]
            replay_id, cursor = answer["replay_id"], answer["next_cursor"]
            progress.update(task, completed=min(requeued, total))
            if cursor is None:
                break
    return {"replay_id": replay_id, "requeued": requeued}
