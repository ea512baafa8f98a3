"""``jobhook status``: is the service ready, and how is it doing — each source's job API budget
and confirmation backlog, each handler's circuit, the work not yet done and the store.

Without an admin token it shows what the open ``/readyz`` says (readiness, budgets, circuits);
with one it reads the admin API's ``GET /status`` for the backlog and the store too.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import click
import httpx
from rich.table import Table

from receiver.cli.client import ClientError, ServiceClient
from receiver.cli.render import _out

if TYPE_CHECKING:
    from rich.console import Console

DEFAULT_URL = "http://127.0.0.1:8000"
EXIT_UNAVAILABLE = 4


@click.command(short_help="Readiness, budgets, backlog, circuits and store.")
@click.option(
    "--url", envvar="JOBHOOK_URL", show_envvar=True, help=f"jobhook's URL [{DEFAULT_URL}]."
)
@click.option(
    "--token",
    envvar="JOBHOOK_ADMIN_TOKEN",
    show_envvar=True,
    help="The admin token: adds the backlog and the store (else only what /readyz says).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the JSON read, for scripts.")
def status(url: str | None, token: str | None, as_json: bool) -> None:
    """Readiness, each source's job API budget and confirmations waiting, each handler's
    circuit and, with an admin token, the work not yet done and the store.

    Exits 0 when ready, 4 when the service is unavailable or cannot be reached.
    """
    base = (url or DEFAULT_URL).rstrip("/")
    try:
        ok, body = _admin_status(base, token) if token else _readyz(base)
    except ClientError as exc:
        click.echo(f"jobhook: {exc}", err=True)
        sys.exit(exc.exit_code)
    if as_json:
        click.echo(json.dumps(body, indent=2))
    else:
        show(base, body, admin=bool(token))
    sys.exit(0 if ok else EXIT_UNAVAILABLE)


def _readyz(base: str) -> tuple[bool, dict[str, Any]]:
    try:
        response = httpx.get(f"{base}/readyz", timeout=10.0)
        body: dict[str, Any] = response.json()
    except (httpx.HTTPError, ValueError) as exc:
        raise ClientError(
            f"cannot read {base}/readyz ({type(exc).__name__}); is `jobhook serve` running? "
            "Point --url (or JOBHOOK_URL) at it"
        ) from None
    return response.status_code == 200, body


def _admin_status(base: str, token: str) -> tuple[bool, dict[str, Any]]:
    """``GET /status``; when the admin API cannot answer it (a wrong token, no admin API, the
    store down), what ``/readyz`` says, with why the rest is missing."""
    client = ServiceClient(base, token)
    try:
        body = client.status()
    except ClientError as exc:
        ok, body = _readyz(base)
        return ok, {**body, "admin_error": str(exc)}
    finally:
        client.close()
    return body.get("status") == "ready", body


def show(base: str, body: dict[str, Any], *, admin: bool) -> None:
    """The status as a heading line and short tables (a table nobody has is left out)."""
    console = _out()
    store = body.get("store", {}).get("backend")
    console.print(f"{base}: [bold]{body.get('status', 'unknown')}[/]"
                  + (f", store {store}" if store else ""))  # fmt: skip
    if "error" in body or "error" in body.get("store", {}):
        console.print(f"  {body.get('error') or body['store']['error']}")
    sources = body.get("sources") or {
        name: {"provider": "", **drain} for name, drain in body.get("confirmations", {}).items()
    }
    rows = []
    for name, s in sorted(sources.items()):
        budget = s.get("budget_per_minute")
        slow = " [red]SLOW[/]" if s.get("slow") else ""
        rows.append(
            [name, s.get("provider", ""), "no job API", "", ""] if budget is None else
            [name, s.get("provider", ""), f"{budget:g}/min", str(s["confirmations"]),
             _duration(s["eta_seconds"]) + slow]
        )  # fmt: skip
    headers = ["source", "provider", "budget", "confirmations waiting", "drains in"]
    _table(console, "sources", headers, rows)
    handlers = body.get("handlers") or body.get("circuits") or {}
    rows = [
        [name, h.get("type", ""), h["state"] if h["state"] == "closed" else f"[red]{h['state']}[/]",
         str(h["failures"])]
        for name, h in sorted(handlers.items())
    ]  # fmt: skip
    _table(console, "handlers", ["handler", "type", "circuit", "failures in a row"], rows)
    backlog = body.get("backlog")
    if backlog:
        since = backlog["oldest_waiting_since"]
        row = [str(backlog[key]) for key in ("completions_resolving", "deliveries_pending",
                                             "deliveries_running", "deliveries_dead")]  # fmt: skip
        row.append("" if since is None else since[:19].replace("T", " "))
        headers = ["completions resolving", "deliveries pending", "running", "dead",
                   "oldest waiting since (UTC)"]  # fmt: skip
        _table(console, "backlog", headers, [row])
    elif "admin_error" in body:
        console.print(f"backlog and store unknown: {body['admin_error']}")
    elif not admin:
        console.print("backlog and store: pass --token (or set JOBHOOK_ADMIN_TOKEN)")


def _table(console: Console, title: str, headers: list[str], rows: list[list[str]]) -> None:
    """Print a table, leaving out the columns (after the first) no row has a value in."""
    if not rows:
        return
    keep = [i for i in range(len(headers)) if i == 0 or any(row[i] for row in rows)]
    table = Table(*(headers[i] for i in keep), title=title)
    for row in rows:
        table.add_row(*(row[i] for i in keep))
    console.print(table)


def _duration(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes} min {secs} s" if minutes else f"{secs} s"
