"""``jobhook audit ls``: the audit trail of a running service (an ``admin`` token's), newest
first: who did what, when, from where, with what outcome, and the refused attempts."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click
from rich.table import Table

from receiver.admin.query import DEFAULT_LIMIT, MAX_LIMIT
from receiver.cli.jobs import DEFAULT_URL, _errors, _json_option, _options
from receiver.cli.render import _out, _text
from receiver.client import core as calls

if TYPE_CHECKING:
    from receiver.cli.client import ServiceClient


@click.group()
def audit() -> None:
    """The audit trail: admin actions and refused attempts."""


@audit.command("ls")
@_options(store=False)
@click.option("--name", "token_name", help="Only this token's rows (its name).")
@click.option("--action", help="Only this action (track_job, replay_jobs, reprocess_job, ...).")
@click.option("--after", help="Rows touched at or after: ISO 8601 (UTC) or Unix seconds.")
@click.option("--before", help="Rows started before: ISO 8601 (UTC) or Unix seconds.")
@click.option("--limit", type=click.IntRange(1, MAX_LIMIT), default=DEFAULT_LIMIT,
              show_default=True, help="Rows per page.")  # fmt: skip
@click.option("--cursor", help="next_cursor of the previous page.")
@click.option("--all", "every", is_flag=True, help="Follow the cursor to the last page.")
@_json_option
@_errors
def ls(url: str | None, token: str | None, token_name: str | None, action: str | None,
       after: str | None, before: str | None, limit: int, cursor: str | None, every: bool,
       as_json: bool) -> None:  # fmt: skip
    """List audit rows, newest first (needs a token with the admin role)."""
    from receiver.cli.client import ServiceClient

    client: ServiceClient = ServiceClient(url or DEFAULT_URL, token)
    params = calls.audit_params(token_name, action, after, before)
    try:
        page = client.audit(params, limit, cursor)
        found = list(page["entries"])
        while every and page["next_cursor"]:
            page = client.audit(params, limit, page["next_cursor"])
            found += page["entries"]
    finally:
        client.close()
    doc = {"entries": found, "next_cursor": page["next_cursor"]}
    if as_json:
        click.echo(json.dumps(doc, indent=2))
    else:
        table(doc)


def table(doc: dict[str, Any]) -> None:
    """One row per audit entry, then the cursor of the next page."""
    from datetime import UTC, datetime

    out = _out()
    if not doc["entries"]:
        out.print("no audit rows")
        return
    grid = Table(box=None, pad_edge=False)
    for column in ("at", "token", "role", "action", "target", "jobs", "outcome", "client",
                   "times", "request"):  # fmt: skip
        grid.add_column(column, overflow="fold")
    for e in doc["entries"]:
        at = datetime.fromtimestamp(e["at"], UTC).strftime("%Y-%m-%d %H:%M:%S")
        grid.add_row(at, e["token"] or "-", e["role"] or "-", e["action"], e["target"],
                     _text(e["jobs"]), e["outcome"], e["client"], str(e["attempts"]),
                     e["request_id"])  # fmt: skip
    out.print(grid)
    if doc["next_cursor"]:
        out.print(f"more: --cursor {doc['next_cursor']}")
